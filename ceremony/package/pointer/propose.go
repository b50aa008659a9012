package pointer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/qinglong/kubectl-ql3/ceremony/package/intent"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

// Stage is the stage evidence port as `package intent` needs it: besides
// verifying an intent, it finds the stage whose lock layer is a lock and
// reads that stage's evidence. stagelayout.Verifier implements it.
type Stage interface {
	intent.StageVerifier
	// FindStage returns the digest of the package manifest whose lock
	// layer has lockDigest.
	FindStage(lockDigest string) (string, error)
	// Read reads the evidence of the stage reference ref.
	Read(ref, receiptHint string) (intent.StageEvidence, error)
}

// ProposeRequest is what the next activation intent is built from.
type ProposeRequest struct {
	// Namespace, ProjectID and PackageID name the target (the cluster
	// identity is read from the cluster).
	Namespace, ProjectID, PackageID string
	// Lock is the package lock's bytes, the stage's lock layer.
	Lock []byte
	// LockName names the lock in errors ("--lock FILE").
	LockName string
	// StageRepo is the stage's repository NAME.
	StageRepo string
}

// Proposal is the next activation intent and the pointer it follows.
type Proposal struct {
	// Intent is the next intent (the active one itself when the stage is
	// already active, so that activate replays it).
	Intent intent.Intent
	// Naming is where its pointer lives.
	Naming intent.Naming
	// Current is the pointer's active intent as read; nil when absent.
	Current *intent.Active
}

// Propose builds the intent that activates the staged lock as the next
// generation of its package on this cluster, so that an intent is never
// written by hand: find the stage holding the lock, read its evidence,
// read the cluster identity, read and re-validate the pointer (Current),
// build the intent after it (Next) and verify the stage against it. It
// never writes.
func Propose(ctx context.Context, o Options, st Stage, r ProposeRequest) (*Proposal, error) {
	manifest, err := st.FindStage(canon.DigestPrefix + sha256Hex(r.Lock))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.LockName, err)
	}
	ev, err := st.Read(r.StageRepo+"@"+manifest, "")
	if err != nil {
		return nil, err
	}
	id, err := ReadClusterIdentity(ctx, o.Namespaces)
	if err != nil {
		return nil, err
	}
	t := intent.Target{ClusterIdentity: id, Namespace: r.Namespace, ProjectID: r.ProjectID, PackageID: r.PackageID}
	draft, err := Next(t, nil, ev)
	if err != nil {
		return nil, err
	}
	nm, err := intent.NamingOf(draft)
	if err != nil {
		return nil, err
	}
	cur, _, err := Current(ctx, o, nm, r.Namespace)
	if err != nil {
		return nil, err
	}
	in, err := Next(t, cur, ev)
	if err != nil {
		return nil, err
	}
	if _, err := st.Verify(in); err != nil {
		return nil, err
	}
	return &Proposal{Intent: in, Naming: nm, Current: cur}, nil
}

// sha256Hex is the hex SHA-256 of data (an OCI digest without its prefix).
func sha256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
