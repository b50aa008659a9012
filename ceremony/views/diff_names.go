package views

import "github.com/qinglong/kubectl-ql3/inventory"

// Changing lists the objects the release would create, change or retire
// (diff -o name): the changed ones in the report's order, then the
// retired ones.
func (r *DiffReport) Changing() []inventory.Identity {
	var ids []inventory.Identity
	for _, ch := range r.Objects {
		if ch.Change != Unchanged {
			ids = append(ids, ch.Object)
		}
	}
	for _, w := range r.Retire {
		ids = append(ids, w.Object)
	}
	return ids
}
