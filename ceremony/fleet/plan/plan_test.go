package plan

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/qinglong/kubectl-ql3/ceremony/fleet/fleetfile"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

const fleetYAML = `schema: kubectl-ql3/fleet@v1
targets:
- {name: dev-a, context: dev-a, namespace: ql3-demo, release: releases/dev}
- {name: prod-a, labels: {ring: prod}, context: prod-a, namespace: ql3-demo, release: releases/prod}
- {name: prod-b, labels: {ring: prod}, context: prod-b, namespace: ql3-demo, release: releases/prod}
waves:
- {name: dev, selector: {names: [dev-a]}, soak: 5m}
- {name: prod, selector: {matchLabels: {ring: prod}}, maxParallel: 2, gate: approval}
`

// d is a well-formed digest made from a label, so tests never type hex.
func d(label string) string { return canon.DigestBytes("test", []byte(label)) }

func hex(label string) string { return strings.TrimPrefix(d(label), "sha256:") }

var tool = Tool{Name: "kubectl-ql3", Version: "v0.1.0", FieldManager: "kubectl-ql3"}

func testFleet(t testing.TB, yaml string) *fleetfile.Fleet {
	t.Helper()
	f, err := fleetfile.Parse("/fleet", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// entry is the plan entry of an upgrade of target name from generation 2.
func entry(name string) Target {
	return Target{Name: name, ClusterIdentity: d("cluster " + name), Namespace: "ql3-demo", Preflight: "preflights/" + name + ".json",
		PreflightDigest: d("preflight " + name), CommandDigest: d("command " + name), Transition: TransitionUpgrade, Version: "3.2.0",
		LockDigest: d("lock"), InventoryDigest: d("inventory"),
		ExpectedHead: "ql3h1-2-" + hex("deployment "+name) + "-" + hex("lock-old") + "-" + hex("state "+name), Generation: 3}
}

func validPlan(t testing.TB) *Plan {
	t.Helper()
	install := entry("prod-b")
	install.Transition, install.ExpectedHead, install.Generation = TransitionInstall, AbsentToken, 1
	p, err := Build(testFleet(t, fleetYAML), tool, []Target{install, entry("dev-a"), entry("prod-a")})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestBuildAndParse(t *testing.T) {
	p := validPlan(t)
	if len(p.Waves) != 2 || p.Waves[0].Targets[0].Name != "dev-a" || p.Waves[1].Targets[0].Name != "prod-a" || p.Waves[1].Targets[1].Name != "prod-b" {
		t.Fatalf("waves: %+v", p.Waves)
	}
	if w := p.Waves[0]; w.SoakSeconds != 300 || w.Soak().Minutes() != 5 || w.MaxParallel != 1 || w.Gate != "auto" {
		t.Fatalf("wave dev: %+v", w)
	}
	data, err := p.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range [][]byte{data, bytes.TrimSuffix(data, []byte("\n"))} {
		got, err := Parse("plan.json", in)
		if err != nil {
			t.Fatal(err)
		}
		if got.SelfDigest != p.SelfDigest {
			t.Fatal("a parsed plan differs")
		}
	}
	if tg, wave, ok := p.Find("prod-b"); !ok || wave != 1 || tg.Generation != 1 {
		t.Fatalf("Find: %+v %d %v", tg, wave, ok)
	}
	if _, _, ok := p.Find("nope"); ok {
		t.Fatal("Find found a target the plan does not have")
	}
}

// TestParseShape: the bytes must be the record's canonical JSON exactly
// (exit 2), and a content edited after sealing is tamper (exit 5).
func TestParseShape(t *testing.T) {
	data, _ := validPlan(t).Bytes()
	var indented bytes.Buffer
	_ = json.Indent(&indented, data, "", "  ")
	for _, tc := range []struct {
		name, in, want string
		class          fail.Class
	}{
		{"indented", indented.String(), "not canonical JSON", fail.Invalid},
		{"two newlines", string(data) + "\n", "not canonical JSON", fail.Invalid},
		{"unknown member", strings.Replace(string(data), `{"fleetDigest"`, `{"extra":1,"fleetDigest"`, 1), `unknown field "extra"`, fail.Invalid},
		{"repeated member", strings.Replace(string(data), `{"fleetDigest"`, `{"fleetDigest":"x","fleetDigest"`, 1), `member "fleetDigest" appears twice`, fail.Invalid},
		{"missing member", strings.Replace(string(data), `"gate":"auto",`, "", 1), "not canonical JSON", fail.Invalid},
		{"null", strings.Replace(string(data), `"maxFailures":0`, `"maxFailures":null`, 1), "not canonical JSON", fail.Invalid},
		{"two values", string(data) + "{}", "more than one JSON value", fail.Invalid},
		{"schema", strings.Replace(string(data), Schema, "qinglong/fleet-plan@v2", 1), `schema "qinglong/fleet-plan@v2"`, fail.Invalid},
		{"edited", strings.Replace(string(data), `"maxParallel":2`, `"maxParallel":3`, 1), "the plan was edited after fleet preflight sealed it", fail.Tamper},
		{"too big", string(data) + strings.Repeat(" ", MaxPlanBytes), "at most 4194304 are allowed", fail.Invalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("plan.json", []byte(tc.in))
			if !fail.Is(err, tc.class) || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "fleet plan plan.json: ") {
				t.Fatalf("got %v (class %v), want %v with %q", err, fail.ClassOf(err), tc.class, tc.want)
			}
		})
	}
}
