package deploy

import (
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory"
)

// VerifyPreflighted renders the release directory dir and checks that it
// is exactly the release the preflight record rec binds, as apply does
// before it writes (loadPreflighted): rendered and verified against its
// lock and the tool constraint (load), then its lock, source, render and
// inventory digests, inventory count, target and field manager against
// the record (checkAgainstPreflight). The directory's path may differ
// from the record's. A release that differs is invalid input (exit 2), as
// apply classes it. It returns the rendered objects; it writes nothing.
func VerifyPreflighted(o Options, dir string, rec *PreflightRecord) ([]*unstructured.Unstructured, error) {
	o.defaults()
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fail.Wrap(fail.Invalid, err)
	}
	ld, err := o.load(abs)
	if err != nil {
		return nil, err
	}
	if err := checkAgainstPreflight(ld, rec); err != nil {
		return nil, err
	}
	return ld.release.Objects, nil
}

// VerifyDeployed renders the release directory dir and checks that it is
// the release the Head h deploys: verified against its own lock, whose
// digest and inventory digest must be h's current ones. Anything else is
// invalid input. It returns the rendered objects; it writes nothing. The
// tool constraint is not asked: the release was deployed already, and
// reading it deploys nothing.
func VerifyDeployed(o Options, dir string, h *Head) ([]*unstructured.Unstructured, error) {
	opts := o.Inventory
	if o.Cluster != nil {
		opts.Mapper = o.Cluster.Mapper()
	}
	rel, lock, err := inventory.LoadRelease(o.FS, dir, opts)
	if err != nil {
		return nil, err
	}
	digest, err := lock.Digest()
	if err != nil {
		return nil, err
	}
	if digest != h.Current.LockDigest || rel.InventoryDigest != h.Current.InventoryDigest {
		return nil, fail.Errorf(fail.Invalid, "release %q (%s, lock %s, inventory %s) is not the release the Head deploys (generation %d: %s, lock %s, inventory %s)",
			dir, lock.Release.Version, digest, rel.InventoryDigest, h.Generation, h.Current.Version, h.Current.LockDigest, h.Current.InventoryDigest)
	}
	return rel.Objects, nil
}
