package views

import (
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/qinglong/kubectl-ql3/inventory"
)

// ReleaseChanges is the change list from one rendered release to another,
// offline: what an approver reviews (approve --release DIR --deployed
// DIR_OLD), both sides verified against digests the preflight record and
// the Head bind, so anyone holding the two directories computes the same
// list and no cluster state enters it. Each object of release is compared
// with the object of the same identity in deployed (nil: nothing deployed,
// every object created), both normalised and Secret-masked as Diff does
// (Normalize, Mask), and is created, changed or unchanged, its diff the
// unified diff of the two YAML texts under the headers
// "deployed/<identity>" and "release/<identity>". The objects deployed
// has and release has not are listed in Retire (no UID or
// resourceVersion: nothing is read). Digest is DiffDigest of this list:
// not the record's diffDigest, which a dry-run against the cluster gave.
func ReleaseChanges(deployed, release []*unstructured.Unstructured, ns, version string) (*DiffReport, error) {
	old := make(map[inventory.Key]*unstructured.Unstructured, len(deployed))
	for _, u := range deployed {
		old[identityOf(u).Key()] = u
	}
	rep := &DiffReport{Schema: DiffSchema, Namespace: ns, Version: version, Objects: make([]ObjectChange, 0, len(release))}
	kept := map[inventory.Key]bool{}
	for _, u := range release {
		id := identityOf(u)
		kept[id.Key()] = true
		var before map[string]any
		if d := old[id.Key()]; d != nil {
			before = d.Object
		}
		b, a := Mask(id, Normalize(before), Normalize(u.Object))
		text, err := unifiedDiff(id, b, a, "deployed/", "release/")
		if err != nil {
			return nil, err
		}
		ch := ObjectChange{Object: id, Change: Changed, Diff: text}
		switch {
		case before == nil:
			ch.Change, rep.Created = Created, rep.Created+1
		case text == "":
			ch.Change, rep.Unchanged = Unchanged, rep.Unchanged+1
		default:
			rep.Changed++
		}
		rep.Objects = append(rep.Objects, ch)
	}
	for _, u := range deployed {
		if id := identityOf(u); !kept[id.Key()] {
			rep.Retire = append(rep.Retire, WouldRetire{Object: id})
		}
	}
	slices.SortFunc(rep.Objects, func(a, b ObjectChange) int { return inventory.Compare(a.Object, b.Object) })
	slices.SortFunc(rep.Retire, func(a, b WouldRetire) int { return inventory.Compare(a.Object, b.Object) })
	var err error
	rep.Digest, err = DiffDigest(rep.Objects)
	return rep, err
}

func identityOf(u *unstructured.Unstructured) inventory.Identity {
	return inventory.Identity{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName()}
}
