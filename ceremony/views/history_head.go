package views

import (
	"context"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// HistoryAtHead is `kubectl ql3 history DIR -n NS`: History with the Head
// of namespace ns, read from the cluster, which must have one.
func HistoryAtHead(ctx context.Context, cl deploy.Cluster, dir, ns string) (*HistoryReport, error) {
	head, err := deploy.ReadHead(ctx, cl, ns)
	if err != nil {
		return nil, err
	}
	if head == nil {
		return nil, fail.Errorf(fail.Invalid, "head %s/%s: absent: nothing is deployed in namespace %q (wrong -n?)", ns, deploy.HeadName, ns)
	}
	return History(dir, head, ns)
}
