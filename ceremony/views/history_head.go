package views

import (
	"context"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/receipts"
)

// HistoryAtHead is `kubectl ql3 history DIR -n NS`: History with the Head
// of namespace ns, read from the cluster, which must have one. When that
// Head names an approval the API server did not attest (approvalStatus's
// evidence, exactly as status reports it), the chain fails with that
// reason.
func HistoryAtHead(ctx context.Context, cl deploy.Cluster, dir, ns string) (*HistoryReport, error) {
	cm, head, err := readStatusHead(ctx, cl, ns)
	if err != nil {
		return nil, err
	}
	_, unattested, err := approvalStatus(ctx, cl, ns, cm, head)
	if err != nil {
		return nil, err
	}
	rep, err := History(dir, head, ns)
	if err != nil || len(unattested) == 0 {
		return rep, err
	}
	rep.Verdict, rep.Chain.Verdict = receipts.VerdictFail, receipts.VerdictFail
	rep.Chain.Reasons = append(rep.Chain.Reasons, unattested...)
	return rep, nil
}
