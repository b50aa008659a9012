package plan

import (
	"fmt"
	"strings"
	"testing"

	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// TestParseRules breaks each rule of docs/fleet.md §4.2 once in a sealed
// plan (re-sealed, so that only the rule fails): exit 2 naming the member.
func TestParseRules(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(p *Plan)
		want string
	}{
		{"fleetDigest", func(p *Plan) { p.FleetDigest = "sha256:abc" }, `fleetDigest: "sha256:abc" is not a digest`},
		{"tool name", func(p *Plan) { p.Tool.Name = "kubectl" }, `tool.name: "kubectl", want "kubectl-ql3"`},
		{"tool version", func(p *Plan) { p.Tool.Version = "" }, `tool.version: "" is not 1 to 128 bytes`},
		{"tool field manager", func(p *Plan) { p.Tool.FieldManager = "a\nb" }, `tool.fieldManager: "a\nb" is not 1 to 128 bytes without control characters`},
		{"no wave", func(p *Plan) { p.Waves = []Wave{} }, "waves: a plan has at least one wave"},
		{"wave name", func(p *Plan) { p.Waves[1].Name = "Prod" }, `waves[1].name: "Prod" is not a DNS-1123 label`},
		{"wave name twice", func(p *Plan) { p.Waves[1].Name = "dev" }, "waves[1].name: dev is also waves[0].name's"},
		{"maxParallel", func(p *Plan) { p.Waves[0].MaxParallel = 0 }, "waves[0].maxParallel: 0 is not from 1 to 1000"},
		{"maxFailures", func(p *Plan) { p.Waves[0].MaxFailures = -1 }, "waves[0].maxFailures: -1 is not from 0 to 1000"},
		{"soakSeconds", func(p *Plan) { p.Waves[0].SoakSeconds = 86401 }, "waves[0].soakSeconds: 86401 is not from 0 to 86400"},
		{"gate", func(p *Plan) { p.Waves[0].Gate = "manual" }, `waves[0].gate: "manual", want "auto" or "approval"`},
		{"no target", func(p *Plan) { p.Waves[0].Targets = []Target{} }, "waves[0].targets: a wave has at least one target"},
		{"target name", func(p *Plan) { p.Waves[0].Targets[0].Name = "dev_a" }, `waves[0].targets[0].name: "dev_a" is not a DNS-1123 label`},
		{"target twice", func(p *Plan) { p.Waves[1].Targets[1].Name = "dev-a" }, "waves[1].targets[1].name: dev-a is also waves[0].targets[0].name's"},
		{"namespace", func(p *Plan) { p.Waves[0].Targets[0].Namespace = "" }, `waves[0].targets[0].namespace: "" is not a DNS-1123 label`},
		{"preflight absolute", func(p *Plan) { p.Waves[0].Targets[0].Preflight = "/tmp/pf.json" }, `waves[0].targets[0].preflight: "/tmp/pf.json" is absolute; write it relative to the plan's directory`},
		{"preflight outside", func(p *Plan) { p.Waves[0].Targets[0].Preflight = "../pf.json" }, `waves[0].targets[0].preflight: "../pf.json" leads outside the plan's directory`},
		{"preflight twice", func(p *Plan) { p.Waves[1].Targets[0].Preflight = "preflights/dev-a.json" }, "waves[1].targets[0].preflight: preflights/dev-a.json is also waves[0].targets[0].preflight's"},
		{"record twice", func(p *Plan) { p.Waves[1].Targets[0].PreflightDigest = p.Waves[0].Targets[0].PreflightDigest }, "waves[1].targets[0].preflightDigest: sha256:"},
		{"one Head twice", func(p *Plan) {
			p.Waves[1].Targets[1].ClusterIdentity = p.Waves[0].Targets[0].ClusterIdentity
		}, "waves[1].targets[1]: cluster sha256:"},
		{"clusterIdentity", func(p *Plan) { p.Waves[0].Targets[0].ClusterIdentity = "" }, `waves[0].targets[0].clusterIdentity: "" is not a digest`},
		{"preflightDigest", func(p *Plan) { p.Waves[0].Targets[0].PreflightDigest = "sha256:X" }, `waves[0].targets[0].preflightDigest: "sha256:X" is not a digest`},
		{"commandDigest", func(p *Plan) { p.Waves[0].Targets[0].CommandDigest = "" }, "waves[0].targets[0].commandDigest"},
		{"lockDigest", func(p *Plan) { p.Waves[0].Targets[0].LockDigest = "" }, "waves[0].targets[0].lockDigest"},
		{"inventoryDigest", func(p *Plan) { p.Waves[0].Targets[0].InventoryDigest = "" }, "waves[0].targets[0].inventoryDigest"},
		{"transition", func(p *Plan) { p.Waves[0].Targets[0].Transition = "deploy" }, `waves[0].targets[0].transition: "deploy", want install, upgrade, rollback or retire`},
		{"version", func(p *Plan) { p.Waves[0].Targets[0].Version = "v3.2.0" }, `waves[0].targets[0].version: "v3.2.0" is not a SemVer 2.0.0 version`},
		{"expectedHead", func(p *Plan) { p.Waves[0].Targets[0].ExpectedHead = "ql3h1-2-abc" }, `waves[0].targets[0].expectedHead: "ql3h1-2-abc" is not an expected-Head token`},
		{"install onto a Head", func(p *Plan) { p.Waves[0].Targets[0].Transition = TransitionInstall }, "waves[0].targets[0].transition: install onto expectedHead ql3h1-2-"},
		{"upgrade onto none", func(p *Plan) { p.Waves[1].Targets[1].Transition = TransitionUpgrade }, "waves[1].targets[1].transition: upgrade onto expectedHead ql3h1-0-none"},
		{"generation", func(p *Plan) { p.Waves[0].Targets[0].Generation = 2 }, "waves[0].targets[0].generation: 2, want 3 (the expected Head's generation plus one)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := validPlan(t)
			tc.edit(p)
			if err := p.Seal(); err != nil {
				t.Fatal(err)
			}
			data, err := p.Bytes()
			if err != nil {
				t.Fatal(err)
			}
			_, err = Parse("plan.json", data)
			if !fail.Is(err, fail.Invalid) || !strings.Contains(err.Error(), "fleet plan plan.json: "+tc.want) {
				t.Fatalf("got %v, want exit 2 with %q", err, tc.want)
			}
		})
	}
}

// Build refuses entries that are not exactly the fleet's targets, and
// Matches a plan of another fleet.
func TestBuildAndMatches(t *testing.T) {
	f := testFleet(t, fleetYAML)
	install := entry("prod-b")
	install.Transition, install.ExpectedHead, install.Generation = TransitionInstall, AbsentToken, 1
	otherNS := entry("prod-a")
	otherNS.Namespace = "other"
	for _, tc := range []struct {
		name    string
		targets []Target
		want    string
	}{
		{"missing", []Target{entry("dev-a"), entry("prod-a")}, `target "prod-b" of wave "prod" has no entry`},
		{"extra", []Target{entry("dev-a"), entry("prod-a"), install, entry("prod-c")}, `an entry for "prod-c", which is no target of the fleet`},
		{"twice", []Target{entry("dev-a"), entry("dev-a")}, `two entries for target "dev-a"`},
		{"namespace", []Target{entry("dev-a"), otherNS, install}, "waves[1].targets[0] is prod-a in namespace other, the fleet's is prod-a in namespace ql3-demo"},
		{"a rule", []Target{entry("dev-a"), entry("prod-a"), entry("prod-b")}, "waves[1].targets[1].preflightDigest"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "a rule" {
				tc.targets[2].PreflightDigest = tc.targets[1].PreflightDigest
			}
			_, err := Build(f, tool, tc.targets)
			if !fail.Is(err, fail.Invalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want exit 2 with %q", err, tc.want)
			}
		})
	}
	p := validPlan(t)
	if err := p.Matches(f); err != nil {
		t.Fatal(err)
	}
	edited := testFleet(t, strings.Replace(fleetYAML, "soak: 5m", "soak: 6m", 1))
	if err := p.Matches(edited); !fail.Is(err, fail.Invalid) || !strings.Contains(err.Error(), "it is not a plan of this fleet file (run fleet preflight again)") {
		t.Fatalf("a plan of the fleet before an edit: %v", err)
	}
}

// The wave digest covers the wave exactly: each target's preflight digest.
func TestWaveDigest(t *testing.T) {
	p := validPlan(t)
	a, err := p.Waves[1].Digest()
	if err != nil {
		t.Fatal(err)
	}
	p.Waves[1].Targets[1].PreflightDigest = d("another preflight")
	if b, _ := p.Waves[1].Digest(); a == b {
		t.Fatal("the wave digest does not cover a target's preflight digest")
	}
	if c, _ := p.Waves[0].Digest(); c == a {
		t.Fatal("two waves, one digest")
	}
}

// At most fleetfile.MaxTargets targets in all (rule 6): a plan of 1000 is
// read, one of 1001 refused.
func TestParseTargetBound(t *testing.T) {
	plan := func(n int) []byte {
		p := validPlan(t)
		p.Waves = p.Waves[:1]
		p.Waves[0].Targets = nil
		for i := range n {
			p.Waves[0].Targets = append(p.Waves[0].Targets, entry(fmt.Sprintf("t%d", i)))
		}
		if err := p.Seal(); err != nil {
			t.Fatal(err)
		}
		data, _ := p.Bytes()
		return data
	}
	if _, err := Parse("plan.json", plan(1000)); err != nil {
		t.Fatalf("1000 targets: %v", err)
	}
	if _, err := Parse("plan.json", plan(1001)); !fail.Is(err, fail.Invalid) || !strings.Contains(err.Error(), "waves: 1001 targets, at most 1000 are allowed") {
		t.Fatalf("1001 targets: %v", err)
	}
}
