package deploy

import (
	"strings"
	"testing"
	"time"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory"
	"github.com/qinglong/kubectl-ql3/receipts"
)

// stuckHead is an applying Head of generation gen: kind to cur (inventory
// inv) from the committed prev, as an apply that can never converge leaves
// it.
func stuckHead(t testing.TB, gen int64, kind string, cur receipts.Deployment, inv []inventory.Identity, prev receipts.Deployment) *Head {
	t.Helper()
	h := &Head{
		Schema: HeadSchema, Phase: PhaseApplying, Generation: gen,
		Transition: HeadTransition{Transition: receipts.Transition{Kind: kind, CommandDigest: d('C'), PreflightDigest: d('P')}, MutationID: strings.Repeat("5a", 16)},
		Current:    HeadDeployment{Deployment: cur, Inventory: inv},
		Previous:   &prev, PreviousReceiptDigest: d('r'),
		Target: receipts.Target{ClusterIdentity: d('1'), Namespace: "ns"},
		Tool:   receipts.Tool{Name: ToolName, Version: "v0.1.0", FieldManager: "kubectl-ql3"},
		Steps:  receipts.Steps{Identity: d('2'), DryRun: d('3')},
	}
	if err := h.Seal(); err != nil {
		t.Fatal(err)
	}
	if err := h.validate(); err != nil {
		t.Fatalf("test Head invalid: %v", err)
	}
	return h
}

func sup(h *Head) *SupersedeIntent { s := supersedeIntentOf(h); return &s }

// The rules of docs/ceremony.md §7.5, pure: only the applying generation
// named, by its own token, by an upgrade above both the superseded and the
// last committed version or by a rollback to the last committed
// deployment.
func TestCheckSupersede(t *testing.T) {
	inv2, inv3 := ids("a", "b"), ids("a", "b", "c")
	v1, v2 := dep("1.0.0", 'x', inv2), dep("2.0.0", 'y', inv2)
	stuck := stuckHead(t, 3, TransitionUpgrade, dep("2.1.0", 'z', inv2), inv2, v2) // 2.0.0 committed at 2
	adds := stuckHead(t, 3, TransitionUpgrade, dep("2.1.0", 'z', inv3), inv3, v2)  // the stuck upgrade adds c
	back := stuckHead(t, 3, TransitionRollback, v1, inv2, v2)                      // a rollback from 2.0.0 to 1.0.0, stuck
	resumed := cloneHead(stuck)
	resumed.Transition.MutationID = strings.Repeat("6b", 16)
	if err := resumed.Seal(); err != nil {
		t.Fatal(err)
	}
	committed := cloneHead(stuck)
	committed.Phase = PhaseCommitted
	committed.Steps.Apply, committed.Steps.Converge, committed.Steps.FinalIdentity = d('4'), d('5'), d('6')
	if err := committed.Seal(); err != nil {
		t.Fatal(err)
	}
	install := committedHead(t, 1, v1, inv2, nil)
	install.Phase, install.Steps.Apply, install.Steps.Converge, install.Steps.FinalIdentity = PhaseApplying, "", "", ""
	if err := install.Seal(); err != nil {
		t.Fatal(err)
	}
	retire := retireHead(t, PhaseApplying, receipts.OutcomePending)
	with := func(kind string, dp receipts.Deployment, inv []inventory.Identity, s *SupersedeIntent) Target {
		return Target{Kind: kind, Deployment: dp, Inventory: inv, Supersedes: s}
	}
	forged := sup(stuck)
	forged.PreflightDigest = d('F')
	runTransitionCases(t, []transitionCase{
		{"rollback to the last committed", stuck, stuck.Expected(), with(TransitionRollback, v2, inv2, sup(stuck)), fail.Other, ""},
		{"upgrade to a fixed release", stuck, stuck.Expected(), with(TransitionUpgrade, dep("2.1.1", 'f', inv2), inv2, sup(stuck)), fail.Other, ""},
		{"upgrade not above the superseded", stuck, stuck.Expected(), with(TransitionUpgrade, dep("2.1.0", 'f', inv2), inv2, sup(stuck)), fail.Invalid, "not greater than the superseded 2.1.0"},
		{"upgrade above a stuck rollback, not above the last committed", back, back.Expected(), with(TransitionUpgrade, dep("1.5.0", 'f', inv2), inv2, sup(back)), fail.Invalid, "not greater than the last committed 2.0.0"},
		{"rollback of a stuck rollback returns to the last committed", back, back.Expected(), with(TransitionRollback, v2, inv2, sup(back)), fail.Other, ""},
		{"rollback to the stuck one's own target", back, back.Expected(), with(TransitionRollback, v1, inv2, sup(back)), fail.Invalid, "not the exact previous deployment 2.0.0"},
		{"upgrade drops an object the stuck upgrade added", adds, adds.Expected(), with(TransitionUpgrade, dep("2.1.1", 'f', inv2), inv2, sup(adds)), fail.Invalid, "omits 1 live object"},
		{"rollback would leave an object the stuck upgrade added", adds, adds.Expected(), with(TransitionRollback, v2, inv2, sup(adds)), fail.Invalid, "inventories differ"},
		{"wrong generation", stuck, stuck.Expected(), with(TransitionRollback, v2, inv2, &SupersedeIntent{Generation: 2}), fail.Invalid, "--supersede 2: the Head is applying generation 3"},
		{"resumed since the preflight", resumed, stuck.Expected(), with(TransitionRollback, v2, inv2, sup(stuck)), fail.Conflict, "moved since the preflight"},
		{"committed since the preflight", committed, stuck.Expected(), with(TransitionRollback, v2, inv2, sup(stuck)), fail.Conflict, "moved since the preflight"},
		{"a committed Head", committed, committed.Expected(), with(TransitionRollback, v2, inv2, sup(stuck)), fail.Invalid, "is committed, not applying: nothing to supersede"},
		{"no Head", nil, ExpectedHead{}, with(TransitionInstall, v1, inv2, &SupersedeIntent{Generation: 1}), fail.Invalid, "there is no Head"},
		{"a stuck install", install, install.Expected(), with(TransitionUpgrade, v2, inv2, sup(install)), fail.Invalid, "is an install"},
		{"a stuck retire", retire, retire.Expected(), with(TransitionUpgrade, dep("3.2.0", 'f', ids("a")), ids("a"), sup(retire)), fail.Invalid, "is a retire"},
		{"superseding by a retire", stuck, stuck.Expected(), with(TransitionRetire, dep("2.2.0", 'f', ids("a")), ids("a"), sup(stuck)), fail.Invalid, "only an upgrade or a rollback supersedes"},
		{"a record naming another transition", stuck, stuck.Expected(), with(TransitionRollback, v2, inv2, forged), fail.Invalid, "does not name the transition the Head is applying"},
		{"no --supersede: the refusal names the way out", stuck, stuck.Expected(), tg(TransitionRollback, v2, inv2), fail.Conflict,
			"`kubectl ql3 rollback DIR --expected-head " + stuck.Expected().String() + " --supersede 3`"},
	})
}

// The superseding Head: generation stuck+1, the last committed deployment
// as previous (and its receipt digest), supersedes listing the stuck
// transition after stuck's own list; it validates, and its supersedes
// rules are enforced on every read.
func TestSupersedingHead(t *testing.T) {
	inv := ids("a", "b")
	v2 := dep("2.0.0", 'y', inv)
	stuck := stuckHead(t, 3, TransitionUpgrade, dep("2.1.0", 'z', inv), inv, v2)
	at := time.Date(2026, 12, 1, 22, 0, 0, 0, time.FixedZone("x", 3600))
	h := cloneHead(stuck)
	h.Transition = HeadTransition{Transition: receipts.Transition{Kind: TransitionRollback, CommandDigest: d('c'), PreflightDigest: d('p')}, MutationID: strings.Repeat("7c", 16)}
	h.Current = HeadDeployment{Deployment: v2, Inventory: inv}
	supersede(h, stuck, at)
	if err := h.Seal(); err != nil {
		t.Fatal(err)
	}
	want := receipts.Superseded{Generation: 3, Kind: TransitionUpgrade, Version: "2.1.0", CommandDigest: d('C'), PreflightDigest: d('P'), MutationID: strings.Repeat("5a", 16), At: "2026-12-01T21:00:00Z"}
	if h.Generation != 4 || *h.Previous != v2 || h.PreviousReceiptDigest != stuck.PreviousReceiptDigest || len(h.Transition.Supersedes) != 1 || h.Transition.Supersedes[0] != want {
		t.Fatalf("superseding Head: generation %d previous %+v prd %s supersedes %+v", h.Generation, h.Previous, h.PreviousReceiptDigest, h.Transition.Supersedes)
	}
	data, _ := h.Bytes()
	if _, err := ParseHead(data); err != nil {
		t.Fatalf("superseding Head does not parse: %v", err)
	}
	if !strings.Contains(string(data), `"supersedes":[{"at":"2026-12-01T21:00:00Z","commandDigest":`) {
		t.Fatalf("head.json lacks transition.supersedes: %s", data)
	}
	for name, mutate := range map[string]func(*Head){
		"not the generation below":     func(h *Head) { h.Transition.Supersedes[0].Generation = 2 },
		"rollback elsewhere":           func(h *Head) { h.Current.Deployment = dep("2.0.0", 'q', inv) },
		"on a retire":                  func(h *Head) { h.Transition.Kind = TransitionRetire },
		"time not whole seconds (UTC)": func(h *Head) { h.Transition.Supersedes[0].At = "2026-12-01T21:00:00.5Z" },
	} {
		t.Run(name, func(t *testing.T) {
			m := cloneHead(h)
			m.Transition.Supersedes = append([]receipts.Superseded(nil), h.Transition.Supersedes...)
			mutate(m)
			assertTampered(t, m, name)
		})
	}
}
