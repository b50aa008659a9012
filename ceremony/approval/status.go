package approval

import (
	"context"

	"github.com/qinglong/kubectl-ql3/ceremony/approval/gate"
	"github.com/qinglong/kubectl-ql3/ceremony/approval/record"
	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
)

// StatusReport is `kubectl ql3 approval status`: the approval object of a
// namespace, validated, and whether it still matches the Head.
type StatusReport struct {
	Namespace       string           `json:"namespace"`
	Present         bool             `json:"present"`
	Approval        *record.Approval `json:"approval,omitempty"`
	UID             string           `json:"uid,omitempty"`
	ResourceVersion string           `json:"resourceVersion,omitempty"`
	// Head is the expected-Head token of the Head now; MatchesHead is
	// whether the approval was proposed against exactly it.
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
	rep := &StatusReport{Namespace: ns, Present: present, Head: h.Expected().String()}
	if present {
		rep.Approval, rep.UID, rep.ResourceVersion = &a, string(cm.UID), cm.ResourceVersion
		rep.MatchesHead = a.ExpectedHead == rep.Head && (h == nil || h.Phase == deploy.PhaseCommitted)
	}
	return rep, nil
}
