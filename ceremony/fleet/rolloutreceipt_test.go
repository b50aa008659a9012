package fleet_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qinglong/kubectl-ql3/ceremony/fleet"
	"github.com/qinglong/kubectl-ql3/receipts"
	"github.com/qinglong/kubectl-ql3/receipts/rollout"
)

// signing gives o a receipt signing key and returns the trusted keys of
// its public half.
func signing(t *testing.T, o *fleet.Options) receipts.TrustedKeys {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	o.Deploy.SignKey = priv
	id, err := receipts.KeyID(pub)
	if err != nil {
		t.Fatal(err)
	}
	return receipts.TrustedKeys{id: pub}
}

// wantRollout audits rep's rollout receipt with keys: it must pass, be
// signed by them, and record each target's state as want says (by target
// name; "committed" ones with their receipt).
func wantRollout(t *testing.T, rep *fleet.ApplyReport, keys receipts.TrustedKeys, outcome string, want map[string]string) *rollout.Receipt {
	t.Helper()
	if rep.Rollout == "" {
		t.Fatalf("no rollout receipt written")
	}
	ar, err := rollout.Audit(rep.Rollout, keys)
	if err != nil || !ar.OK() || ar.Attestation != receipts.SignatureVerified {
		t.Fatalf("rollout receipt audit: %v %+v", err, ar)
	}
	data, err := os.ReadFile(rep.Rollout)
	if err != nil {
		t.Fatal(err)
	}
	r, err := rollout.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if r.Outcome != outcome || r.Plan != rep.Plan {
		t.Fatalf("rollout receipt: outcome %s plan %s, want %s %s", r.Outcome, r.Plan, outcome, rep.Plan)
	}
	for _, w := range r.Waves {
		for _, tg := range w.Targets {
			if tg.State != want[tg.Name] || (tg.State == rollout.TargetCommitted) != (tg.Receipt != nil) {
				t.Fatalf("rollout receipt: target %s is %s (receipt %v), want %s", tg.Name, tg.State, tg.Receipt, want[tg.Name])
			}
		}
	}
	return r
}

// tamperRollout copies the fleet's receipts directory and breaks it three
// ways, each of which the rollout receipt's audit must refuse naming what
// broke: a byte of a target's receipt changed, a target's receipt removed,
// and the attestation checked against another key.
func tamperRollout(t *testing.T, root, file string, r *rollout.Receipt, keys receipts.TrustedKeys) {
	t.Helper()
	var ref *rollout.Ref
	for _, w := range r.Waves {
		for _, tg := range w.Targets {
			if tg.Receipt != nil && ref == nil {
				ref = tg.Receipt
			}
		}
	}
	other := signingKeys(t)
	for name, c := range map[string]struct {
		breakIt func(dir string)
		keys    receipts.TrustedKeys
		reason  string
	}{
		"altered target receipt": {func(dir string) {
			p := filepath.Join(dir, filepath.FromSlash(ref.Path))
			data, _ := os.ReadFile(p)
			data[len(data)/2] ^= 1
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}, keys, "its bytes digest to"},
		"missing target receipt": {func(dir string) {
			if err := os.Remove(filepath.Join(dir, filepath.FromSlash(ref.Path))); err != nil {
				t.Fatal(err)
			}
		}, keys, "no such file"},
		"another key": {func(string) {}, other, "attestation"},
	} {
		dir := filepath.Join(t.TempDir(), "receipts")
		if err := os.CopyFS(dir, os.DirFS(root)); err != nil {
			t.Fatal(err)
		}
		c.breakIt(dir)
		ar, err := rollout.Audit(filepath.Join(dir, filepath.Base(file)), c.keys)
		if err != nil || ar.OK() || !strings.Contains(report(ar), c.reason) {
			t.Fatalf("%s: audit %v %+v, want a failure saying %q", name, err, ar, c.reason)
		}
	}
}

func signingKeys(t *testing.T) receipts.TrustedKeys {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	id, err := receipts.KeyID(pub)
	if err != nil {
		t.Fatal(err)
	}
	return receipts.TrustedKeys{id: pub}
}

func report(ar *rollout.Report) string {
	s := strings.Join(ar.Reasons, "; ")
	for _, tg := range ar.Targets {
		s += "; " + strings.Join(tg.Reasons, "; ")
	}
	return s
}
