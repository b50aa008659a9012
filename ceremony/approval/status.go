package approval

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/qinglong/kubectl-ql3/ceremony/approval/gate"
	"github.com/qinglong/kubectl-ql3/ceremony/approval/record"
	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
)

// StatusReport is `kubectl ql3 approval status`: the approval object of a
// namespace, validated, and whether it still matches the Head
// (docs/approval.md §3 lists the members exactly as -o json prints them).
type StatusReport struct {
	Namespace string `json:"namespace"`
	Present   bool   `json:"present"`
	// Approval is the object's data less schema: seven keys.
	Approval        *record.Approval `json:"approval,omitempty"`
	UID             string           `json:"uid,omitempty"`
	ResourceVersion string           `json:"resourceVersion,omitempty"`
	// Head is the expected-Head token of the Head now (AbsentToken when
	// there is none); MatchesHead is whether the approval was proposed
	// against exactly it, the Head being committed or absent.
	Head        string `json:"head"`
	MatchesHead bool   `json:"matchesHead"`
}

// Status reads the approval object of ns (a malformed one is tamper, exit
// 5) and the Head. Read-only.
func Status(ctx context.Context, c Clients, ns string) (*StatusReport, error) {
	cm, a, present, err := gate.Read(ctx, c.CS, ns)
	if err != nil {
		return nil, err
	}
	h, err := deploy.ReadHead(ctx, c.Cluster, ns)
	if err != nil {
		return nil, err
	}
	return statusOf(ns, cm, a, present, h), nil
}

// statusOf is the report of the approval object cm (a, when present) and
// the Head h of ns (nil: none). An approval matches the Head when its
// expectedHead is the Head's token and the Head is committed; with no Head
// the token is AbsentToken, so an install's approval matches while no
// Head exists. An approval against an applying Head (a --supersede
// record) does not match.
func statusOf(ns string, cm *corev1.ConfigMap, a record.Approval, present bool, h *deploy.Head) *StatusReport {
	rep := &StatusReport{Namespace: ns, Present: present, Head: h.Expected().String()}
	if present {
		rep.Approval, rep.UID, rep.ResourceVersion = &a, string(cm.UID), cm.ResourceVersion
		rep.MatchesHead = a.ExpectedHead == rep.Head && (h == nil || h.Phase == deploy.PhaseCommitted)
	}
	return rep
}
