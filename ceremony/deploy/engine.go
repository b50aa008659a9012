package deploy

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/qinglong/kubectl-ql3/ceremony/cas"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory"
	"github.com/qinglong/kubectl-ql3/inventory/rendercache"
	"github.com/qinglong/kubectl-ql3/receipts"
)

// ToolName is the tool authority's name.
const ToolName = "kubectl-ql3"

// HeadFieldManager is the field manager of the Head's own writes. It is
// never the release's (the lock refuses it), so the two can never share
// field ownership.
const HeadFieldManager = inventory.HeadFieldManager

// Options configure one ceremony command.
type Options struct {
	Cluster     Cluster
	FS          filesys.FileSystem // release files; the disk in the CLI
	ToolVersion string             // the running plugin's version
	Inventory   inventory.Options  // secret policy; the Mapper is filled from Cluster
	Parallelism int                // concurrent applies within a stage (default 16)
	Timeout     time.Duration      // bound on convergence (default 5m)
	ReceiptsDir string             // default: <release dir>/receipts
	SignKey     ed25519.PrivateKey // optional receipt signing key
	Progress    io.Writer          // one line per step; nil = quiet
	// RenderCache, if set, serves a render the lock binds without running
	// kustomize, and stores fresh ones (docs/render-cache.md); nil renders.
	RenderCache *rendercache.Cache

	conv *convergence // the convergence read applyAll starts and converge finishes
	// watchable are the workloads whose watch by name the deployer's RBAC
	// rules grant (checkAccess): converge watches them to poll as soon as
	// they change.
	watchable map[inventory.Identity]bool
	// pollPause, when set (tests), is every pause between converge's polls
	// (those during the apply end with it), instead of the backoff and its
	// 5 s cap.
	pollPause time.Duration
}

func (o *Options) defaults() {
	if o.Parallelism <= 0 {
		o.Parallelism = 16
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Minute
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
}

func (o *Options) say(format string, args ...any) {
	fmt.Fprintf(o.Progress, format+"\n", args...)
}

func newMutationID() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err))
	}
	return hex.EncodeToString(b)
}

// loaded is a release rendered and verified against its lock.
type loaded struct {
	release    *inventory.Release
	lock       *inventory.Lock
	lockDigest string
}

func (o *Options) load(dir string) (*loaded, error) {
	opts := o.Inventory
	if o.Cluster != nil {
		opts.Mapper = o.Cluster.Mapper()
	}
	start := time.Now()
	rel, lock, use, err := inventory.LoadReleaseCached(o.FS, dir, opts, o.RenderCache)
	if err != nil {
		return nil, err
	}
	if o.RenderCache != nil {
		o.say("render: %s, %d objects in %s", use, len(rel.Objects), time.Since(start).Round(time.Millisecond))
	}
	if err := inventory.CheckToolConstraint(lock, o.ToolVersion); err != nil {
		return nil, err
	}
	ld, err := lock.Digest()
	if err != nil {
		return nil, err
	}
	return &loaded{release: rel, lock: lock, lockDigest: ld}, nil
}

func (l *loaded) deployment() receipts.Deployment {
	return receipts.Deployment{
		Version:         l.lock.Release.Version,
		LockDigest:      l.lockDigest,
		InventoryDigest: l.release.InventoryDigest,
		InventoryCount:  len(l.release.Inventory),
	}
}

func (l *loaded) target() receipts.Target {
	return receipts.Target{ClusterIdentity: l.lock.Target.ClusterIdentity, Namespace: l.lock.Target.Namespace}
}

// identityStep reads the cluster identity and checks it against the lock.
func (o *Options) identityStep(ctx context.Context, want string) (string, error) {
	got, err := ReadClusterIdentity(ctx, o.Cluster)
	if err != nil {
		return "", err
	}
	if got != want {
		return "", fail.Errorf(fail.Invalid, "cluster identity %s does not match the lock's target.clusterIdentity %s: wrong --context?", got, want)
	}
	return receipts.IdentityStepDigest(got)
}

func transcriptDigest(step string, v any) (string, error) {
	return inventory.DigestOf(inventory.DomainTranscript, map[string]any{"step": step, "record": v})
}

// readHead reads and validates the Head. A missing Head is (nil, nil, nil).
// A Head whose target names another cluster than cluster (the identity
// read from the cluster it came from) is tamper: a Head copied from
// another cluster, digests intact, is never taken as this one's.
func (o *Options) readHead(ctx context.Context, ns, cluster string) (*Head, *cmRef, error) {
	cm, present, err := cas.Read(ctx, o.Cluster.Heads(ns), HeadName, headWhat(ns))
	if err != nil || !present {
		return nil, nil, err
	}
	h, err := ParseHeadConfigMap(cm)
	if err != nil {
		return nil, nil, err
	}
	if h.Target.ClusterIdentity != cluster {
		return nil, nil, fail.Errorf(fail.Tamper, "head %s/%s: target.clusterIdentity %s names another cluster than the one it was read from (%s): a Head copied between clusters is never trusted; investigate", ns, HeadName, h.Target.ClusterIdentity, cluster)
	}
	return h, &cmRef{resourceVersion: cm.ResourceVersion}, nil
}

func headWhat(ns string) string { return "head " + ns + "/" + HeadName }

// cmRef is what a compare-and-swap needs from the read it is based on.
type cmRef struct{ resourceVersion string }

// ReceiptFromHead rebuilds the receipt of a committed Head. Receipts are
// deterministic: the same Head always gives the same bytes.
func ReceiptFromHead(h *Head) (*receipts.Receipt, error) {
	if h.Phase != PhaseCommitted {
		return nil, fmt.Errorf("head generation %d is %s, not committed: no receipt", h.Generation, h.Phase)
	}
	inv := h.Current.Inventory
	if inv == nil {
		inv = []inventory.Identity{}
	}
	r := &receipts.Receipt{
		Schema:                receipts.Schema,
		Generation:            h.Generation,
		Transition:            h.Transition.Transition,
		Deployment:            h.Current.Deployment,
		Inventory:             inv,
		PreviousDeployment:    h.Previous,
		PreviousReceiptDigest: h.PreviousReceiptDigest,
		Head:                  receipts.HeadRef{DeploymentDigest: h.DeploymentDigest, StateDigest: h.StateDigest},
		Target:                h.Target,
		Tool:                  h.Tool,
		Steps:                 h.Steps,
		Flags:                 receipts.ExpectedFlags,
		Retired:               h.Retired,
		ApprovalPolicy:        h.ApprovalPolicy,
		Approval:              h.Approval,
	}
	if err := r.Seal(); err != nil {
		return nil, err
	}
	return r, nil
}

// RenderedOf is the release rel as a receipt's attestation states it: its
// render digest and each object's digest, in inventory order.
func RenderedOf(rel *inventory.Release) (*receipts.Rendered, error) {
	digests, err := rel.ObjectDigests()
	if err != nil {
		return nil, err
	}
	out := &receipts.Rendered{RenderDigest: rel.RenderDigest, Objects: make([]receipts.RenderedObject, len(digests))}
	for i, d := range digests {
		out.Objects[i] = receipts.RenderedObject{ID: rel.Inventory[i], Digest: d}
	}
	return out, nil
}

func (o *Options) receiptsDir(releaseDir string) string {
	if o.ReceiptsDir != "" {
		return o.ReceiptsDir
	}
	return filepath.Join(releaseDir, "receipts")
}

// ReadHead reads and validates the Head in namespace ns (nil if absent),
// including that it names the cluster it was read from.
func ReadHead(ctx context.Context, c Cluster, ns string) (*Head, error) {
	o := Options{Cluster: c}
	id, err := ReadClusterIdentity(ctx, c)
	if err != nil {
		return nil, err
	}
	h, _, err := o.readHead(ctx, ns, id)
	return h, err
}
