package views

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/qinglong/kubectl-ql3/inventory"
)

// Changing (diff -o name) lists the created and changed objects in the
// report's order, then the retired ones; never an unchanged one.
func TestDiffReportChanging(t *testing.T) {
	id := func(name string) inventory.Identity {
		return inventory.Identity{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: name}
	}
	rep := &DiffReport{
		Objects: []ObjectChange{{Object: id("a"), Change: Changed}, {Object: id("b"), Change: Unchanged}, {Object: id("c"), Change: Created}},
		Retire:  []WouldRetire{{Object: id("d")}},
	}
	if diff := cmp.Diff([]inventory.Identity{id("a"), id("c"), id("d")}, rep.Changing()); diff != "" {
		t.Errorf("Changing (-want +got):\n%s", diff)
	}
	if got := (&DiffReport{Objects: []ObjectChange{{Object: id("b"), Change: Unchanged}}}).Changing(); got != nil {
		t.Errorf("no change: %v, want none", got)
	}
}
