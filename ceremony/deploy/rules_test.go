package deploy

import (
	"strings"
	"testing"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory"
	"github.com/qinglong/kubectl-ql3/receipts"
)

// d is a distinct, well-formed digest per label.
func d(label byte) string { return inventory.DigestBytes("test", []byte{label}) }

func ids(names ...string) []inventory.Identity {
	var out []inventory.Identity
	for _, n := range names {
		out = append(out, inventory.Identity{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: n})
	}
	inventory.SortIdentities(out)
	return out
}

func dep(version string, lock byte, inv []inventory.Identity) receipts.Deployment {
	digest, _ := inventory.InventoryDigest(inv)
	return receipts.Deployment{Version: version, LockDigest: d(lock), InventoryDigest: digest, InventoryCount: len(inv)}
}

// tg is the target of a transition kind to deployment dep with inventory inv.
func tg(kind string, dep receipts.Deployment, inv []inventory.Identity) Target {
	return Target{Kind: kind, Deployment: dep, Inventory: inv}
}

// committedHead builds a valid, sealed, committed Head.
func committedHead(t testing.TB, gen int64, cur receipts.Deployment, inv []inventory.Identity, prev *receipts.Deployment) *Head {
	t.Helper()
	h := &Head{
		Schema: HeadSchema, Phase: PhaseCommitted, Generation: gen,
		Transition: HeadTransition{Transition: receipts.Transition{Kind: TransitionInstall, CommandDigest: d('c'), PreflightDigest: d('p')}, MutationID: strings.Repeat("ab", 16)},
		Current:    HeadDeployment{Deployment: cur, Inventory: inv},
		Previous:   prev,
		Target:     receipts.Target{ClusterIdentity: d('1'), Namespace: "ns"},
		Tool:       receipts.Tool{Name: ToolName, Version: "v0.1.0", FieldManager: "kubectl-ql3"},
		Steps:      receipts.Steps{Identity: d('2'), DryRun: d('3'), Apply: d('4'), Converge: d('5'), FinalIdentity: d('6')},
	}
	if prev != nil {
		h.Transition.Kind = TransitionUpgrade
		h.PreviousReceiptDigest = d('r')
	}
	if err := h.Seal(); err != nil {
		t.Fatal(err)
	}
	if err := h.validate(); err != nil {
		t.Fatalf("test Head invalid: %v", err)
	}
	return h
}

func TestCheckTransition(t *testing.T) {
	inv1 := ids("a", "b")
	inv2 := ids("a", "b", "c")
	invDrop := ids("a", "c")
	v1 := dep("3.0.0", 'x', inv1)
	h1 := committedHead(t, 1, v1, inv1, nil)
	v2 := dep("3.1.0", 'y', inv2)
	h2 := committedHead(t, 2, v2, inv2, &v1)
	v2b := dep("3.1.1", 'z', inv2)
	h3 := committedHead(t, 3, v2b, inv2, &v2) // previous has the same inventory: rollback allowed
	// Identity across versions: the Gadget custom resource moves from
	// v1beta1 to v1 (and an HPA to autoscaling/v2); each is one object.
	gadget := func(apiVersion string) inventory.Identity {
		return inventory.Identity{APIVersion: apiVersion, Kind: "Gadget", Namespace: "ns", Name: "g"}
	}
	withObj := func(inv []inventory.Identity, more ...inventory.Identity) []inventory.Identity {
		out := append(append([]inventory.Identity(nil), inv...), more...)
		inventory.SortIdentities(out)
		return out
	}
	invBeta := withObj(inv2, gadget("demo.qinglong.io/v1beta1"))
	invV1 := withObj(inv2, gadget("demo.qinglong.io/v1"))
	invOtherGroup := withObj(inv2, gadget("other.qinglong.io/v1"))
	vBeta := dep("3.2.0", 'b', invBeta)
	hBeta := committedHead(t, 3, vBeta, invBeta, &v2)
	vV1 := dep("3.3.0", 'v', invV1)
	hV1 := committedHead(t, 4, vV1, invV1, &vBeta) // moved to v1; previous applied v1beta1
	hpa := func(apiVersion string) inventory.Identity {
		return inventory.Identity{APIVersion: apiVersion, Kind: "HorizontalPodAutoscaler", Namespace: "ns", Name: "web"}
	}
	invHPA2 := withObj(inv1, hpa("autoscaling/v2"))
	hHPA1 := committedHead(t, 2, dep("3.1.0", 'h', withObj(inv1, hpa("autoscaling/v1"))), withObj(inv1, hpa("autoscaling/v1")), &v1)
	applying := committedHead(t, 1, v1, inv1, nil)
	applying.Phase = PhaseApplying

	runTransitionCases(t, []transitionCase{
		{"install onto no Head", nil, ExpectedHead{}, tg(TransitionInstall, v1, inv1), fail.Other, ""},
		{"upgrade onto no Head", nil, ExpectedHead{}, tg(TransitionUpgrade, v1, inv1), fail.Invalid, "first deployment must be --transition install"},
		{"rollback onto no Head", nil, ExpectedHead{}, tg(TransitionRollback, v1, inv1), fail.Invalid, "must be --transition install"},
		{"Head removed since preflight", nil, h1.Expected(), tg(TransitionUpgrade, v2, inv2), fail.Conflict, "absent, but the preflight expects generation 1"},
		{"unknown transition", nil, ExpectedHead{}, tg("replace", v1, inv1), fail.Invalid, `--transition "replace"`},
		{"Head applying", applying, applying.Expected(), tg(TransitionUpgrade, v2, inv2), fail.Conflict, "still applying"},
		{"stale token", h1, ExpectedHead{}, tg(TransitionUpgrade, v2, inv2), fail.Conflict, "moved since the preflight"},
		{"install onto a Head", h1, h1.Expected(), tg(TransitionInstall, v2, inv2), fail.Invalid, "already has deployment 3.0.0"},
		{"upgrade adds objects", h1, h1.Expected(), tg(TransitionUpgrade, v2, inv2), fail.Other, ""},
		{"upgrade same version", h1, h1.Expected(), tg(TransitionUpgrade, dep("3.0.0", 'y', inv2), inv2), fail.Invalid, "not greater"},
		{"upgrade older version", h1, h1.Expected(), tg(TransitionUpgrade, dep("2.9.9", 'y', inv2), inv2), fail.Invalid, "not greater"},
		{"upgrade to a pre-release of the same version", h1, h1.Expected(), tg(TransitionUpgrade, dep("3.0.0-rc.1", 'y', inv2), inv2), fail.Invalid, "not greater"},
		{"upgrade omits a live object", h2, h2.Expected(), tg(TransitionUpgrade, dep("3.2.0", 'w', invDrop), invDrop), fail.Invalid, "omits 1 live object"},
		{"upgrade bad version", h1, h1.Expected(), tg(TransitionUpgrade, dep("v3.1.0", 'y', inv2), inv2), fail.Invalid, "release.version"},
		{"rollback without previous", h1, h1.Expected(), tg(TransitionRollback, v1, inv1), fail.Invalid, "no previous deployment"},
		{"rollback to exact previous", h3, h3.Expected(), tg(TransitionRollback, v2, inv2), fail.Other, ""},
		{"rollback to another lock", h3, h3.Expected(), tg(TransitionRollback, dep("3.1.0", 'q', inv2), inv2), fail.Invalid, "not the exact previous deployment"},
		{"rollback to another version", h3, h3.Expected(), tg(TransitionRollback, dep("3.0.0", 'y', inv2), inv2), fail.Invalid, "not the exact previous deployment"},
		{"rollback across an inventory change", h2, h2.Expected(), tg(TransitionRollback, v1, inv1), fail.Invalid, "inventories differ: the target drops v1/ConfigMap/ns/c"},
		{"upgrade moves a custom resource to a new version", hBeta, hBeta.Expected(), tg(TransitionUpgrade, vV1, invV1), fail.Other, ""},
		{"upgrade moves an hpa to autoscaling/v2", hHPA1, hHPA1.Expected(), tg(TransitionUpgrade, dep("3.2.0", 'i', invHPA2), invHPA2), fail.Other, ""},
		{"upgrade moves a kind to another group", hBeta, hBeta.Expected(), tg(TransitionUpgrade, dep("3.3.0", 'o', invOtherGroup), invOtherGroup), fail.Invalid, "omits 1 live object(s) of 3.2.0, and kubectl-ql3 never prunes: demo.qinglong.io/v1beta1/Gadget/ns/g"},
		{"rollback returns a custom resource to its previous version", hV1, hV1.Expected(), tg(TransitionRollback, vBeta, invBeta), fail.Other, ""},
		{"rollback whose target is not the previous inventory", hV1, hV1.Expected(), tg(TransitionRollback, receipts.Deployment{Version: vBeta.Version, LockDigest: vBeta.LockDigest, InventoryDigest: d('0'), InventoryCount: len(invBeta)}, invBeta), fail.Invalid, "is not the previous deployment's"},
	})
}

// transitionCase is one row of a CheckTransition table: the Head read, the
// token the preflight pinned, the target, and the outcome.
type transitionCase struct {
	name  string
	head  *Head
	exp   ExpectedHead
	tgt   Target
	class fail.Class // fail.Other = allowed
	msg   string
}

func runTransitionCases(t *testing.T, tests []transitionCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckTransition(tt.head, tt.exp, tt.tgt)
			if tt.class == fail.Other {
				if err != nil {
					t.Fatalf("want allowed, got %v", err)
				}
				return
			}
			if err == nil || fail.ClassOf(err) != tt.class || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("err = %v (class %v), want class %v containing %q", err, fail.ClassOf(err), tt.class, tt.msg)
			}
		})
	}
}

// assertTampered seals h and checks that ParseHead refuses its bytes as
// tamper.
func assertTampered(t *testing.T, h *Head, name string) {
	t.Helper()
	if err := h.Seal(); err != nil {
		t.Fatal(err)
	}
	data, _ := h.Bytes()
	if _, err := ParseHead(data); !fail.Is(err, fail.Tamper) {
		t.Fatalf("ParseHead accepted %s: %v", name, err)
	}
}

func TestExpectedHeadToken(t *testing.T) {
	h := committedHead(t, 1, dep("3.0.0", 'x', ids("a")), ids("a"), nil)
	tok := h.Expected().String()
	got, err := ParseExpectedHead(tok)
	if err != nil || got != h.Expected() {
		t.Fatalf("round trip %q: %+v %v", tok, got, err)
	}
	if got, err := ParseExpectedHead(AbsentToken); err != nil || got != (ExpectedHead{}) {
		t.Fatalf("absent token: %+v %v", got, err)
	}
	for _, bad := range []string{"", "ql3h1-0", "ql3h1-1-none", "ql3h1-01-" + strings.Repeat("a", 64*3+2), strings.ToUpper(tok), tok + "-", strings.Replace(tok, "ql3h1", "ql3h2", 1)} {
		if _, err := ParseExpectedHead(bad); !fail.Is(err, fail.Invalid) {
			t.Errorf("ParseExpectedHead(%q) = %v, want invalid", bad, err)
		}
	}
}

func TestHeadRoundTripAndValidation(t *testing.T) {
	inv := ids("a", "b")
	good := committedHead(t, 2, dep("3.1.0", 'y', inv), inv, &receipts.Deployment{Version: "3.0.0", LockDigest: d('x'), InventoryDigest: d('i'), InventoryCount: 1})
	cm, err := good.ConfigMap("ns")
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseHeadConfigMap(cm)
	if err != nil || back.SelfDigest != good.SelfDigest {
		t.Fatalf("round trip: %v", err)
	}
	mutations := map[string]func(h *Head){
		"schema":                   func(h *Head) { h.Schema = "x" },
		"phase":                    func(h *Head) { h.Phase = "done" },
		"generation 0":             func(h *Head) { h.Generation = 0 },
		"install at generation 2":  func(h *Head) { h.Transition.Kind = TransitionInstall },
		"upgrade without previous": func(h *Head) { h.Previous = nil },
		"mutation id":              func(h *Head) { h.Transition.MutationID = "XYZ" },
		"count":                    func(h *Head) { h.Current.InventoryCount = 5 },
		"inventory order":          func(h *Head) { h.Current.Inventory = []inventory.Identity{inv[1], inv[0]} },
		"inventory digest":         func(h *Head) { h.Current.InventoryDigest = d('0') },
		"version":                  func(h *Head) { h.Current.Version = "v3" },
		"committed missing step":   func(h *Head) { h.Steps.Converge = "" },
		"applying with late step":  func(h *Head) { h.Phase = PhaseApplying },
		"target":                   func(h *Head) { h.Target.ClusterIdentity = "x" },
		"tool":                     func(h *Head) { h.Tool.FieldManager = "" },
	}
	for name, mutate := range mutations {
		t.Run(name, func(t *testing.T) {
			h := cloneHead(good)
			h.Current.Inventory = append([]inventory.Identity(nil), good.Current.Inventory...)
			mutate(h)
			assertTampered(t, h, name)
		})
	}
}

// FuzzParseHead: the Head parser never panics, and whatever it accepts, in
// either stored form, is canonical and re-seals to itself.
func FuzzParseHead(f *testing.F) {
	inv := ids("a")
	h := &Head{
		Schema: HeadSchema, Phase: PhaseCommitted, Generation: 1,
		Transition: HeadTransition{Transition: receipts.Transition{Kind: TransitionInstall, CommandDigest: d('c'), PreflightDigest: d('p')}, MutationID: strings.Repeat("ab", 16)},
		Current:    HeadDeployment{Deployment: dep("3.0.0", 'x', inv), Inventory: inv},
		Target:     receipts.Target{ClusterIdentity: d('1'), Namespace: "ns"},
		Tool:       receipts.Tool{Name: ToolName, Version: "v0.1.0", FieldManager: "kubectl-ql3"},
		Steps:      receipts.Steps{Identity: d('2'), DryRun: d('3'), Apply: d('4'), Converge: d('5'), FinalIdentity: d('6')},
	}
	if err := h.Seal(); err != nil {
		f.Fatal(err)
	}
	data, _ := h.Bytes()
	f.Add(data)
	packed, _ := upgradeHead(f, ids("a-1", "a-2", "b")).encode(HeadSchemaV2)
	f.Add(packed)
	retire, _ := retireHead(f, PhaseCommitted, receipts.OutcomeDeleted).Bytes()
	f.Add(retire)
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"schema":"qinglong/deployment-head@v1"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		h, schema, err := parseHead(data)
		if err != nil {
			if !fail.Is(err, fail.Tamper) {
				t.Fatalf("non-tamper error class for bad input: %v", err)
			}
			return
		}
		again, err := h.encode(schema)
		if err != nil || string(again) != string(data) {
			t.Fatalf("accepted bytes are not canonical")
		}
	})
}
