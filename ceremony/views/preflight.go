package views

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
)

// PreflightWithDiff is `kubectl ql3 preflight --diff`: the preflight, whose
// own dry-run answers are diffed against the live objects as Diff does (no
// object is dry-run twice), its record binding the change list's digest
// (diffDigest). The report names the preflight's namespace and version and
// lists the retirements its record binds.
func PreflightWithDiff(ctx context.Context, o deploy.Options, req deploy.PreflightRequest) (*deploy.PreflightResult, *DiffReport, error) {
	var diff *DiffReport
	req.Diff = func(ctx context.Context, objs, dryRun []*unstructured.Unstructured, fm string, force bool) (string, error) {
		var err error
		diff, err = Diff(ctx, o.Cluster, DiffRequest{Objects: objs, DryRun: dryRun, FieldManager: fm, ForceConflicts: force, Parallelism: o.Parallelism})
		if err != nil {
			return "", err
		}
		return diff.Digest, nil
	}
	res, err := deploy.RunPreflight(ctx, o, req)
	if err != nil || diff == nil {
		return res, nil, err
	}
	diff.Namespace, diff.Version = res.Record.Target.Namespace, res.Record.Release.Version
	// What the record's retire binds, as diff lists it.
	for _, r := range res.Record.Retired {
		diff.Retire = append(diff.Retire, WouldRetire{Object: r.ID, UID: r.UID, ResourceVersion: r.ResourceVersion})
	}
	return res, diff, nil
}
