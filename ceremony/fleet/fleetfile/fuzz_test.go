package fleetfile

import (
	"testing"

	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// FuzzParse: Parse never panics and refuses with fail.Invalid only; what
// it accepts holds every target in exactly one wave, each wave's targets
// in the fleet's order, every value in its range, and resolves to the same
// digest when read again.
func FuzzParse(f *testing.F) {
	for _, s := range []string{goodYAML, "", "a: b", "[1]", "schema: kubectl-ql3/fleet@v1\ntargets: []\nwaves: []\n",
		"schema: kubectl-ql3/fleet@v1\ntargets: [{name: a, namespace: n1, release: r}]\nwaves: [{name: w, selector: {names: [a]}, soak: 1h}]\n",
		"a: &x 1\nb: *x\n", "\xff", "---\n---\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fl, err := Parse("/fleet", data)
		if err != nil {
			if !fail.Is(err, fail.Invalid) {
				t.Fatalf("not invalid: %v", err)
			}
			return
		}
		checkResolved(t, fl)
		again, err := Parse("/fleet", data)
		if err != nil {
			t.Fatal(err)
		}
		a, err := fl.Digest()
		if err != nil {
			t.Fatalf("accepted but no digest: %v", err)
		}
		if b, _ := again.Digest(); a != b {
			t.Fatalf("the digest changed on re-read: %s %s", a, b)
		}
	})
}

// checkResolved checks the invariants of a resolved fleet.
func checkResolved(t *testing.T, fl *Fleet) {
	t.Helper()
	if len(fl.Targets) == 0 || len(fl.Waves) == 0 || len(fl.Waves) > len(fl.Targets) {
		t.Fatalf("%d targets, %d waves", len(fl.Targets), len(fl.Waves))
	}
	order := map[string]int{}
	for i, tg := range fl.Targets {
		order[tg.Name] = i
	}
	seen := map[string]bool{}
	for _, w := range fl.Waves {
		if w.MaxParallel < 1 || w.MaxFailures < 0 || w.Soak < 0 || w.Soak > MaxSoak || (w.Gate != GateAuto && w.Gate != GateApproval) || len(w.Targets) == 0 {
			t.Fatalf("wave %+v", w)
		}
		for i, name := range w.Targets {
			if seen[name] || (i > 0 && order[w.Targets[i-1]] >= order[name]) {
				t.Fatalf("wave %s: %q twice or out of order", w.Name, name)
			}
			seen[name] = true
		}
	}
	if len(seen) != len(fl.Targets) {
		t.Fatalf("%d of %d targets in a wave", len(seen), len(fl.Targets))
	}
}
