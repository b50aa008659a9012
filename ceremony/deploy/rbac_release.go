package deploy

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory"
)

// ReleaseRBAC is `kubectl ql3 rbac DIR [--retire-from DIR_OLD]`: the least
// privilege of the ceremony on the release in dir, verified against its
// lock (RBACRetire), kinds resolved through opts.Mapper. With retireFrom,
// the deployed release a retire to dir starts from, it also grants the
// deletes of the objects retireFrom has and dir has not; it must target
// the same namespace and retire at least one object.
func ReleaseRBAC(fsys filesys.FileSystem, dir, retireFrom string, opts inventory.Options, subj RBACSubject) ([]any, error) {
	rel, lock, err := inventory.LoadRelease(fsys, dir, opts)
	if err != nil {
		return nil, err
	}
	var retired []*unstructured.Unstructured
	if retireFrom != "" {
		old, oldLock, err := inventory.LoadRelease(fsys, retireFrom, opts)
		if err != nil {
			return nil, fmt.Errorf("--retire-from: %w", err)
		}
		if oldLock.Target != lock.Target {
			return nil, fail.Errorf(fail.Invalid, "--retire-from %q targets %+v, not the release's %+v", retireFrom, oldLock.Target, lock.Target)
		}
		if retired = RetiredObjects(old.Objects, rel.Objects); len(retired) == 0 {
			return nil, fail.Errorf(fail.Invalid, "--retire-from %q: the release keeps every object of it: nothing to retire", retireFrom)
		}
	}
	return RBACRetire(rel.Objects, retired, lock.Target.Namespace, opts.Mapper, subj)
}
