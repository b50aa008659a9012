// Package approval is the two-person rule's ceremony (docs/approval.md):
// propose a preflight record, approve or reject it as another person, and
// show where a namespace's approval stands. The approval is one ConfigMap
// next to the Head whose names the API server attests (the policy in
// package gate); apply's gate is gate.Check.
package approval

import (
	"context"
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/qinglong/kubectl-ql3/ceremony/access"
	"github.com/qinglong/kubectl-ql3/ceremony/approval/gate"
	"github.com/qinglong/kubectl-ql3/ceremony/approval/record"
	"github.com/qinglong/kubectl-ql3/ceremony/cas"
	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// FieldManager is the field manager of the approval's writes.
const FieldManager = "kubectl-ql3-approval"

// Clients are the API clients the ceremony uses: the typed client for the
// approval object and the identity, and the deployment's Cluster for the
// Head, read exactly as apply reads it.
type Clients struct {
	CS      kubernetes.Interface
	Cluster deploy.Cluster
}

// NewClients builds the clients from a client configuration.
func NewClients(cfg *rest.Config) (Clients, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return Clients{}, fail.Errorf(fail.Invalid, "kubeconfig: %w", err)
	}
	cl, err := deploy.NewKubeCluster(cfg)
	if err != nil {
		return Clients{}, fail.Errorf(fail.Invalid, "kubeconfig: %w", err)
	}
	return Clients{CS: cs, Cluster: cl}, nil
}

// Subject is what an approval is about: a preflight record, as apply reads
// it (deploy.ReadPreflight).
type Subject struct {
	Record          string `json:"record"`
	Namespace       string `json:"namespace"`
	Transition      string `json:"transition"`
	Version         string `json:"version"`
	PreflightDigest string `json:"preflightDigest"`
	CommandDigest   string `json:"commandDigest"`
	ExpectedHead    string `json:"expectedHead"`
	// Proposer is the record's proposer, when the transition needs an
	// approval (preflight recorded who it authenticated); propose refuses
	// anyone else.
	Proposer string `json:"proposer,omitempty"`

	rec  *deploy.PreflightRecord // the record, as read
	head *deploy.Head            // the Head it expects, as read (nil: none)
}

// load reads the record at path exactly as apply does and checks that the
// Head of its namespace is still exactly the Head it expects (committed):
// an approval is about a transition that can still happen.
func load(ctx context.Context, c Clients, path string) (Subject, error) {
	rec, err := deploy.ReadPreflight(path)
	if err != nil {
		return Subject{}, err
	}
	s := Subject{Record: path, Namespace: rec.Target.Namespace, Transition: rec.Command.Transition, Version: rec.Command.Version,
		PreflightDigest: rec.SelfDigest, CommandDigest: rec.CommandDigest, ExpectedHead: rec.Command.ExpectedHead.String(),
		Proposer: rec.Proposer, rec: rec}
	id, err := deploy.ReadClusterIdentity(ctx, c.Cluster)
	if err != nil {
		return Subject{}, err
	}
	if id != rec.Target.ClusterIdentity {
		return Subject{}, fail.Errorf(fail.Invalid, "preflight %s is for cluster %s, the kubeconfig's context is cluster %s: use that cluster's context", path, rec.Target.ClusterIdentity, id)
	}
	h, err := deploy.ReadHead(ctx, c.Cluster, s.Namespace)
	if err != nil {
		return Subject{}, err
	}
	supersedes := rec.Command.Supersedes != nil && h != nil && rec.Command.Supersedes.Generation == h.Generation
	if h != nil && h.Phase != deploy.PhaseCommitted && !supersedes {
		return Subject{}, fail.Errorf(fail.Conflict, "head %s: generation %d is %s: finish it (kubectl ql3 resume) and preflight again; an approval is only for a transition from a committed Head", s.Namespace, h.Generation, h.Phase)
	}
	if now := h.Expected().String(); now != s.ExpectedHead {
		return Subject{}, fail.Errorf(fail.Conflict, "head %s moved: it is now %s, preflight %s expects %s: preflight again (kubectl ql3 head -n %s)", s.Namespace, now, path, s.ExpectedHead, s.Namespace)
	}
	s.head = h
	return s, nil
}

// loadAs is load, and the caller's username as the API server
// authenticated it.
func loadAs(ctx context.Context, c Clients, path string) (Subject, string, error) {
	s, err := load(ctx, c, path)
	if err != nil {
		return Subject{}, "", err
	}
	me, err := gate.WhoAmI(ctx, c.CS)
	return s, me, err
}

// Result is a propose, approve or reject: the approval object as it now is.
type Result struct {
	Subject Subject `json:"subject"`
	// Outcome: proposed, replaced, approved, rejected, or replayed (it
	// already was exactly so: nothing written).
	Outcome         string          `json:"outcome"`
	Approval        record.Approval `json:"approval"`
	UID             string          `json:"uid"`
	ResourceVersion string          `json:"resourceVersion"`
	// Replaced is the approval propose deleted first, if any.
	Replaced *record.Approval `json:"replaced,omitempty"`
	// Settled: the write's answer was lost (or a 409) and reading the
	// object back showed it held exactly our intent.
	Settled bool `json:"settled,omitempty"`
	// ContentChecked (approve and reject only) says whether the release
	// behind the record's digests was checked (--release): Review then
	// holds what was verified and the changes shown; NotChecked otherwise
	// says what was not.
	ContentChecked *bool     `json:"contentChecked,omitempty"`
	Review         *Reviewed `json:"review,omitempty"`
	NotChecked     string    `json:"notChecked,omitempty"`
}

func result(s Subject, outcome string, cm *corev1.ConfigMap, a record.Approval) *Result {
	return &Result{Subject: s, Outcome: outcome, Approval: a, UID: string(cm.UID), ResourceVersion: cm.ResourceVersion}
}

// landed reports whether cur holds exactly want.
func landed(want record.Approval) func(cur *corev1.ConfigMap) bool {
	return func(cur *corev1.ConfigMap) bool { return maps.Equal(cur.Data, want.Data()) }
}

// describe says who holds cur, for a conflict's message.
func describe(cur *corev1.ConfigMap, present bool) string {
	if !present {
		return "the approval was removed"
	}
	a, err := gate.Parse(cur)
	switch {
	case err != nil:
		return "the approval is malformed (" + err.Error() + ")"
	case a.Decision == record.Pending:
		return "it is a pending proposal by " + a.Proposer + " of preflight " + a.PreflightDigest
	}
	return "it was " + a.Decision + " by " + a.Approver + " (proposed by " + a.Proposer + ", preflight " + a.PreflightDigest + ")"
}

// write is the approval's compare-and-swap through the kernel: a create
// (cur nil) or an update carrying cur's resourceVersion, every lost answer
// or 409 settled by reading the object again.
func write(ctx context.Context, c Clients, ns string, cur *corev1.ConfigMap, want record.Approval, say cas.Progress) (cas.Result[*corev1.ConfigMap], error) {
	desired := gate.ConfigMap(ns, want)
	if cur != nil {
		desired = cur.DeepCopy()
		desired.Data = want.Data()
	}
	w := cas.Write[*corev1.ConfigMap]{
		Client: c.CS.CoreV1().ConfigMaps(ns), What: gate.What(ns), Desired: desired, Create: cur == nil, FieldManager: FieldManager,
		Validate: func(cur *corev1.ConfigMap, present bool) error {
			if !present {
				return nil
			}
			_, err := gate.Parse(cur)
			return err
		},
		Landed: landed(want), Describe: describe, Policy: cas.SettleOnce, Say: say,
		Refused: func(op cas.Op, err error) error {
			if gate.IsDenial(err, "") {
				return fail.Errorf(fail.Invalid, "%s: the API server's approval policy refused the write: %v", gate.What(ns), err)
			}
			return cas.MissingNamespace(ns)(op, err)
		},
	}
	return w.Do(ctx)
}

// review is the permission review before the first write: it fails
// closed, naming what is missing and the role that grants it.
func review(ctx context.Context, c Clients, needs []access.Access, role string) error {
	return access.Require(ctx, access.NewReview(access.NewReviewer(c.CS)), needs, "kubectl ql3 rbac --role "+role+" -n NAMESPACE prints the least privilege")
}
