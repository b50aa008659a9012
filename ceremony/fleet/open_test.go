package fleet

import (
	"fmt"
	"sync"
	"testing"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/ceremony/fleet/fleetfile"
)

// TestOpenKeepsAtMostOpenedMax: a command keeps at most openedMax targets
// connected — opening one more lets the least recently opened go, and only
// that one is connected again when next opened — so its memory does not
// grow with the fleet; a target opened again while kept is not reconnected.
func TestOpenKeepsAtMostOpenedMax(t *testing.T) {
	t.Parallel() // pure: runs while the package's cluster tests wait on the API server
	var mu sync.Mutex
	connects := map[string]int{}
	o := &Options{Connect: func(_ *fleetfile.Fleet, t fleetfile.Target) (deploy.Cluster, error) {
		mu.Lock()
		defer mu.Unlock()
		connects[t.Name]++
		return nil, nil
	}}
	f := &fleetfile.Fleet{Dir: t.TempDir()}
	open := func(i int) {
		t.Helper()
		if _, err := o.open(f, fleetfile.Target{Name: fmt.Sprintf("t%03d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range openedMax {
		open(i)
	}
	open(0) // t000 is now the most recently used; t001 the least
	open(openedMax)
	if len(o.opened) != openedMax {
		t.Fatalf("%d targets kept connected, want %d", len(o.opened), openedMax)
	}
	open(0)
	open(openedMax)
	open(1)
	want := map[string]int{"t000": 1, "t001": 2, fmt.Sprintf("t%03d", openedMax): 1}
	for name, n := range want {
		if connects[name] != n {
			t.Errorf("%s connected %d times, want %d (all: %v)", name, connects[name], n, connects)
		}
	}
}
