package pointer

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qinglong/kubectl-ql3/ceremony/access"
	"github.com/qinglong/kubectl-ql3/ceremony/cas"
	"github.com/qinglong/kubectl-ql3/ceremony/package/intent"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

// Options are a publisher's or inspector's clients.
type Options struct {
	// ConfigMaps is the ConfigMap client of the intent's namespace.
	ConfigMaps cas.Client[*corev1.ConfigMap]
	// Namespaces reads the kube-system Namespace (the cluster identity).
	Namespaces cas.Client[*corev1.Namespace]
	// Review answers the permission review (activate only).
	Review *access.Review
	// Verifier is the stage evidence port.
	Verifier intent.StageVerifier
	// Hint ends a missing-permission error (where the least privilege is
	// printed); Settle says how to settle an unknown outcome (the inspect
	// command line).
	Hint, Settle string
	// Say reports progress; nil is quiet.
	Say cas.Progress
	// Now is the activation time (default time.Now).
	Now func() time.Time

	// beforeWrite, in tests, runs between the validated read and the write.
	beforeWrite func()
}

// Action is what an activation did.
type Action string

// The actions of Result.
const (
	// Created: generation 1, the pointer did not exist.
	Created Action = "created"
	// Updated: the pointer held the previous lock and now holds the intent.
	Updated Action = "updated"
	// Replayed: the pointer already held exactly this intent.
	Replayed Action = "replayed"
)

// Result is a completed activation, as read back after the write.
type Result struct {
	Action Action `json:"action"`
	// Settled: a 409 was decided by reading the pointer back.
	Settled bool `json:"settled,omitempty"`
	Pointer Ref  `json:"pointer"`
	// IntentDigest is the activated intent's digest.
	IntentDigest string `json:"intentDigest"`
	// Active is the pointer's active.json as read back.
	Active *intent.Active `json:"active"`
	// Evidence is the stage evidence, verified again after the write.
	Evidence intent.StageEvidence `json:"evidence"`
}

// Ref locates a pointer ConfigMap.
type Ref struct {
	Namespace       string `json:"namespace"`
	Name            string `json:"name"`
	TargetDigest    string `json:"targetDigest"`
	ResourceVersion string `json:"resourceVersion,omitempty"`
}

func what(nm intent.Naming, ns string) string {
	return "active pointer ConfigMap " + ns + "/" + nm.Name
}

// access is a permission on the pointer ConfigMap (name "" for create).
func configMapAccess(verb, ns, name string) access.Access {
	return access.Access{Verb: verb, Resource: "configmaps", Namespace: ns, Name: name}
}

// identityAccess is the read of the cluster identity.
var identityAccess = access.Access{Verb: "get", Resource: "namespaces", Name: metav1.NamespaceSystem}

// ReadClusterIdentity is digest("cluster-identity", UID of kube-system).
func ReadClusterIdentity(ctx context.Context, c cas.Client[*corev1.Namespace]) (string, error) {
	uid, err := cas.KubeSystemUID(ctx, c)
	if err != nil {
		return "", err
	}
	return canon.ClusterIdentity(uid), nil
}

// sameCluster checks that the intent names the cluster the clients reach.
func (o *Options) sameCluster(ctx context.Context, in intent.Intent) error {
	id, err := ReadClusterIdentity(ctx, o.Namespaces)
	if err != nil {
		return err
	}
	if id != in.ClusterIdentity {
		return fail.Errorf(fail.Invalid, "the intent is for cluster %s, but this cluster is %s (kubectl ql3 version prints it): check --context", in.ClusterIdentity, id)
	}
	return nil
}

// verify asks the stage evidence port and compares its answer with the
// intent (unavailable, conflict, or the evidence).
func (o *Options) verify(in intent.Intent) (intent.StageEvidence, error) {
	if o.Verifier == nil {
		return intent.StageEvidence{}, fail.Errorf(fail.Invalid, "stage evidence: no verifier")
	}
	ev, err := o.Verifier.Verify(in)
	if err != nil {
		return ev, err
	}
	return ev, intent.CompareEvidence(in, ev)
}

// Activate makes in the active intent of its target (docs/package-pointer.md,
// "Activate, step by step"): verify the stage evidence and the cluster;
// review permissions; read the pointer and validate it (Check); an exact
// replay writes nothing; generation 1 is created only when the pointer is
// absent; a later generation requires the pointer's intent to be
// generation-1 with lock digest equal to in's previousLockDigest and is
// written by an update carrying that read's resourceVersion, and only
// that one; the write goes through cas.Write with Policy NoGuess (a lost
// answer is unavailable at once, to be settled with inspect; a 409 is
// success only when a fresh read shows exactly this intent). Then the
// pointer is read again and the evidence verified again before success.
func Activate(ctx context.Context, o Options, in intent.Intent) (*Result, error) {
	in, err := intent.Normalize(in)
	if err != nil {
		return nil, err
	}
	nm, _ := intent.NamingOf(in)
	id, _ := intent.Digest(in)
	ns, w := in.Namespace, what(nm, in.Namespace)
	if err := access.Require(ctx, o.Review, []access.Access{identityAccess, configMapAccess("get", ns, nm.Name)}, o.Hint); err != nil {
		return nil, err
	}
	if err := o.sameCluster(ctx, in); err != nil {
		return nil, err
	}
	if _, err := o.verify(in); err != nil {
		return nil, fmt.Errorf("%w; nothing was written", err)
	}
	got, err := o.swap(in, nm, w).Do(ctx)
	if err != nil {
		return nil, err
	}
	res := &Result{Pointer: Ref{Namespace: ns, Name: nm.Name, TargetDigest: nm.TargetDigest}, IntentDigest: id, Action: Updated, Settled: got.Settled}
	switch {
	case got.Replayed:
		o.Say.Printf("%s already holds exactly this intent (%s): nothing to write", w, in)
		res.Action = Replayed
		return o.confirm(ctx, in, res)
	case got.Created:
		res.Action = Created
	}
	o.Say.Printf("%s: %s (%s)", w, res.Action, in)
	return o.confirm(ctx, in, res)
}

// swap is the compare-and-swap of the pointer nm (named w) to in: policy
// NoGuess, a write only over a read the intent follows exactly (build).
func (o *Options) swap(in intent.Intent, nm intent.Naming, w string) *cas.Swap[*corev1.ConfigMap] {
	ns := in.Namespace
	return &cas.Swap[*corev1.ConfigMap]{
		Client: o.ConfigMaps, Name: nm.Name, What: w, FieldManager: FieldManager, Policy: cas.NoGuess, Say: o.Say,
		Check: func(cur *corev1.ConfigMap) error { _, err := Check(cur); return err },
		Replay: func(cur *corev1.ConfigMap) bool {
			a, err := Check(cur)
			return err == nil && Same(a.Intent, in)
		},
		Build: func(_ context.Context, cur *corev1.ConfigMap, present bool) (*corev1.ConfigMap, error) {
			return o.build(in, w, cur, present)
		},
		Review: func(ctx context.Context, create bool) error {
			if err := access.Require(ctx, o.Review, []access.Access{configMapAccess("", ns, nm.Name).CreateOrUpdate(create)}, o.Hint); err != nil {
				return err
			}
			if o.beforeWrite != nil {
				o.beforeWrite()
			}
			return nil
		},
		Unsettled: func(err error) error {
			return fmt.Errorf("%w; settle it with %s (never by activating again blindly)", err, o.settle())
		},
		Landed: func(cur *corev1.ConfigMap) bool { return Holds(cur, in) },
		Describe: func(cur *corev1.ConfigMap, present bool) string {
			if !present {
				return "the pointer was deleted"
			}
			if a, err := Check(cur); err == nil {
				return fmt.Sprintf("the pointer holds generation %d (lock %s, intent %s)", a.Intent.Generation, a.Intent.LockDigest, a.Receipt.IntentDigest)
			}
			return "the pointer changed"
		},
		Refused: func(op cas.Op, err error) error {
			if err := cas.MissingNamespace(ns)(op, err); err != nil {
				return fmt.Errorf("%w; nothing was written", err)
			}
			return nil
		},
	}
}

// build is the pointer ConfigMap holding in over the read (cur, present,
// checked): generation 1 only when the pointer is absent; a later
// generation only over the pointer holding generation-1 with lock digest
// in's previousLockDigest.
func (o *Options) build(in intent.Intent, w string, cur *corev1.ConfigMap, present bool) (*corev1.ConfigMap, error) {
	if present {
		a, err := Check(cur)
		if err != nil {
			return nil, err
		}
		switch {
		case in.PreviousLockDigest == nil:
			return nil, fail.Errorf(fail.Conflict, "%s already holds generation %d (lock %s), and this intent is a first activation (generation 1, previousLockDigest null): build a new intent from the pointer (kubectl ql3 package intent); nothing was written", w, a.Intent.Generation, a.Intent.LockDigest)
		case a.Intent.LockDigest != *in.PreviousLockDigest || a.Intent.Generation != in.Generation-1:
			return nil, fail.Errorf(fail.Conflict, "%s holds generation %d with lock %s, but this intent (generation %d) replaces generation %d with lock %s: another activation won, or the intent is stale; build a new intent from the pointer (kubectl ql3 package intent); nothing was written", w, a.Intent.Generation, a.Intent.LockDigest, in.Generation, in.Generation-1, *in.PreviousLockDigest)
		}
	} else if in.PreviousLockDigest != nil {
		return nil, fail.Errorf(fail.Conflict, "%s does not exist, but this intent (generation %d) replaces lock %s: the pointer it expects is gone (or was never created here); nothing was written", w, in.Generation, *in.PreviousLockDigest)
	}
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	desired, _, err := ConfigMapFor(in, now())
	return desired, err
}

func (o *Options) settle() string {
	if o.Settle != "" {
		return o.Settle
	}
	return "`kubectl ql3 package inspect --intent FILE`"
}

// confirm reads the pointer again, requires exactly in, and verifies the
// stage evidence again: success is only ever reported from that read.
func (o *Options) confirm(ctx context.Context, in intent.Intent, res *Result) (*Result, error) {
	nm, _ := intent.NamingOf(in)
	w := what(nm, in.Namespace)
	cur, present, err := cas.Read(ctx, o.ConfigMaps, nm.Name, w)
	if err != nil {
		if fail.Is(err, fail.Unavailable) {
			return nil, fmt.Errorf("%w; the activation is not confirmed: settle it with %s", err, o.settle())
		}
		return nil, err
	}
	if !present {
		return nil, fail.Errorf(fail.Conflict, "%s is gone when read back after the activation: someone deleted it", w)
	}
	a, err := Check(cur)
	if err != nil {
		return nil, err
	}
	if !Same(a.Intent, in) {
		return nil, fail.Errorf(fail.Conflict, "%s holds generation %d (lock %s) when read back, not this intent: another activation followed", w, a.Intent.Generation, a.Intent.LockDigest)
	}
	ev, err := o.verify(in)
	if err != nil {
		return nil, fmt.Errorf("the pointer holds this intent, but re-verifying its stage failed: %w", err)
	}
	res.Active, res.Evidence, res.Pointer.ResourceVersion = a, ev, cur.ResourceVersion
	return res, nil
}
