package fleetfile

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// goodYAML is a fleet every rule accepts: four targets in three waves, by
// names and by labels, with each optional field both given and left out.
const goodYAML = `schema: kubectl-ql3/fleet@v1
targets:
- name: dev-a
  labels: {ring: dev}
  kubeconfig: kubeconfigs/dev.yaml
  context: dev-a
  namespace: ql3-demo
  release: releases/dev
- name: stg-a
  labels: {ring: staging, example.com/team: platform}
  kubeconfig: kubeconfigs/stg.yaml
  namespace: ql3-demo
  release: releases/staging
- name: prod-a
  labels: {ring: prod, region: eu}
  context: prod-a
  namespace: ql3-demo
  release: releases/prod
- name: prod-b
  labels: {ring: prod, region: us}
  context: prod-b
  namespace: ql3-demo
  release: releases/prod
waves:
- name: dev
  selector: {names: [dev-a]}
- name: staging
  selector:
    matchLabels: {ring: staging}
  soak: 10m
- name: prod
  selector: {matchLabels: {ring: prod}}
  maxParallel: 2
  maxFailures: 1
  soak: 1h30m
  gate: approval
`

func TestParseResolves(t *testing.T) {
	f, err := Parse("/fleet", []byte(goodYAML))
	if err != nil {
		t.Fatal(err)
	}
	if f.Dir != "/fleet" || len(f.Targets) != 4 || len(f.Waves) != 3 {
		t.Fatalf("resolved %+v", f)
	}
	want := [][]string{{"dev-a"}, {"stg-a"}, {"prod-a", "prod-b"}}
	for i, w := range f.Waves {
		if !slices.Equal(w.Targets, want[i]) {
			t.Errorf("waves[%d] holds %q, want %q", i, w.Targets, want[i])
		}
	}
	dev, prod := f.Waves[0], f.Waves[2]
	if dev.MaxParallel != 1 || dev.MaxFailures != 0 || dev.Soak != 0 || dev.Gate != GateAuto {
		t.Errorf("defaults: %+v", dev)
	}
	if prod.MaxParallel != 2 || prod.MaxFailures != 1 || prod.Soak != 90*time.Minute || prod.Gate != GateApproval {
		t.Errorf("prod wave: %+v", prod)
	}
	stg, _ := f.Target("stg-a")
	if stg.Context != "" || stg.Labels["example.com/team"] != "platform" || f.Path(stg.Kubeconfig) != "/fleet/kubeconfigs/stg.yaml" {
		t.Errorf("stg-a: %+v", stg)
	}
	if p, _ := f.Target("prod-a"); p.Kubeconfig != "" || f.Path(p.Kubeconfig) != "" {
		t.Errorf("prod-a: %+v", p)
	}
	if _, ok := f.Target("nope"); ok {
		t.Error("Target found a target the fleet does not have")
	}
}

// wholeDocs are TestParseRules' cases that are not one edit of goodYAML.
var wholeDocs = map[string]string{
	"targets empty":   "schema: kubectl-ql3/fleet@v1\ntargets: []\nwaves: [{name: dev, selector: {names: [dev-a]}}]\n",
	"waves a mapping": "schema: kubectl-ql3/fleet@v1\ntargets: [{name: a, namespace: n, release: r}]\nwaves: {name: dev}\n",
	"empty file":      "# nothing\n",
	"not a mapping":   "- schema: kubectl-ql3/fleet@v1\n",
}

// ruleCases are TestParseRules' edits: each breaks one rule of goodYAML.
var ruleCases = []struct{ name, old, new, want string }{
	// §1 the YAML rules
	{"not yaml", "waves:\n", "waves: [\n", "not valid YAML"},
	{"two documents", "", "\n---\nschema: x\n", "want one YAML document, got 2"},
	{"duplicate key", "  soak: 10m\n", "  soak: 10m\n  soak: 5m\n", `key "soak" already set`},
	{"anchor", "labels: {ring: dev}", "labels: &l {ring: dev}", "targets[0].labels: anchors and aliases are not allowed"},
	{"explicit tag", "context: dev-a", "context: !!str dev-a", "targets[0].context: the explicit tag !!str is not allowed"},
	{"merge key", "  selector: {names: [dev-a]}\n", "  selector: {names: [dev-a]}\n  <<: {soak: 5m}\n", "waves[0]: merge keys (<<) are not allowed"},
	{"octal integer", "maxParallel: 2", "maxParallel: 010", `waves[2].maxParallel: "010" is not an integer written in plain decimal digits`},
	{"float integer", "maxFailures: 1", "maxFailures: 1.0", `waves[2].maxFailures: "1.0" is not an integer`},
	{"not UTF-8", "ql3-demo\n  release: releases/dev", "ql3-demo\xff\n  release: releases/dev", "not UTF-8"},
	// §2 fields
	{"schema", "kubectl-ql3/fleet@v1", "kubectl-ql3/fleet@v2", `schema: "kubectl-ql3/fleet@v2", want "kubectl-ql3/fleet@v1"`},
	{"unknown field", "  context: dev-a\n", "  contexts: dev-a\n", "targets[0].contexts: unknown field; the fields are name, labels, kubeconfig, context, namespace, release"},
	{"unknown top field", "waves:\n", "wave:\n", "wave: unknown field"},
	{"missing namespace", "  namespace: ql3-demo\n  release: releases/dev\n", "  release: releases/dev\n", "targets[0].namespace: is missing"},
	{"null", "context: dev-a", "context:", "targets[0].context: is null; give a value or leave the field out"},
	{"name not a label", "name: dev-a\n  labels", "name: Dev_A\n  labels", `targets[0].name: "Dev_A" is not a DNS-1123 label`},
	{"name a number", "name: dev-a\n  labels", "name: 12\n  labels", "targets[0].name: want a string, got a number"},
	{"namespace", "namespace: ql3-demo\n  release: releases/dev", "namespace: ql3.demo\n  release: releases/dev", `targets[0].namespace: "ql3.demo" is not a DNS-1123 label`},
	{"label value bool", "{ring: dev}", "{ring: yes}", `targets[0].labels["ring"]: want a string, got a boolean (quote it`},
	{"label key", "{ring: dev}", "{Ring/x: dev}", `targets[0].labels["Ring/x"]: the key's prefix "Ring" is not a DNS-1123 subdomain`},
	{"label value", "{ring: dev}", "{ring: -dev}", `targets[0].labels["ring"]: "-dev" is not a label value`},
	{"labels not a map", "{ring: dev}", "[dev]", "targets[0].labels: want a mapping of label keys to values, got a list"},
	{"kubeconfig absolute", "kubeconfigs/dev.yaml", "/etc/kube.yaml", `targets[0].kubeconfig: "/etc/kube.yaml" is absolute; write it relative to the fleet file's directory`},
	{"kubeconfig dotdot", "kubeconfigs/dev.yaml", "kubeconfigs/../../dev.yaml", `targets[0].kubeconfig: "kubeconfigs/../../dev.yaml" leads outside the fleet file's directory`},
	{"kubeconfig not clean", "kubeconfigs/dev.yaml", "./kubeconfigs//dev.yaml", `is not a clean path; write "kubeconfigs/dev.yaml"`},
	{"kubeconfig empty", "kubeconfigs/dev.yaml", `""`, "targets[0].kubeconfig: is empty"},
	{"kubeconfig backslash", "kubeconfigs/dev.yaml", `'kubeconfigs\dev.yaml'`, `holds a '\'`},
	{"release dot", "releases/dev", ".", `targets[0].release: "." names the fleet file's directory itself`},
	{"release missing", "  release: releases/dev\n", "", "targets[0].release: is missing"},
	{"context empty", "context: dev-a", `context: ""`, "targets[0].context: is empty; leave the field out"},
	{"context control", "context: dev-a", `context: "dev\ta"`, `targets[0].context: "dev\ta" holds a control character`},
	{"targets empty", "", "", "targets: is empty; a fleet has at least one target"},
	{"waves a mapping", "", "", "waves: want a list, got a mapping"},
	{"empty file", "", "", "want one YAML document, got 0"},
	{"not a mapping", "", "", "want a mapping, got a list"},
	{"wave name", "- name: dev\n", "- name: Dev\n", `waves[0].name: "Dev" is not a DNS-1123 label`},
	{"selector missing", "  selector: {names: [dev-a]}\n", "", "waves[0].selector: is missing"},
	{"selector both", "{names: [dev-a]}", "{names: [dev-a], matchLabels: {ring: dev}}", "waves[0].selector: want exactly one of names and matchLabels"},
	{"selector none", "{names: [dev-a]}", "{}", "waves[0].selector: want exactly one of names and matchLabels"},
	{"names empty", "{names: [dev-a]}", "{names: []}", "waves[0].selector.names: is empty"},
	{"names repeated", "{names: [dev-a]}", "{names: [dev-a, dev-a]}", `waves[0].selector.names[1]: "dev-a" is also names[0]`},
	{"matchLabels empty", "{matchLabels: {ring: prod}}", "{matchLabels: {}}", "waves[2].selector.matchLabels: is empty"},
	{"maxParallel zero", "maxParallel: 2", "maxParallel: 0", "waves[2].maxParallel: 0 is not an integer from 1 to 1000"},
	{"maxParallel string", "maxParallel: 2", `maxParallel: "2"`, "waves[2].maxParallel: want an integer, got a string"},
	{"maxFailures negative", "maxFailures: 1", "maxFailures: -1", `waves[2].maxFailures: "-1" is not an integer written in plain decimal digits`},
	{"soak fraction", "soak: 1h30m", "soak: 1.5h", `waves[2].soak: "1.5h" is not a duration of whole hours, minutes and seconds`},
	{"soak order", "soak: 1h30m", "soak: 30m1h", `waves[2].soak: "30m1h" is not a duration`},
	{"soak too long", "soak: 1h30m", "soak: 24h1s", `waves[2].soak: "24h1s" is longer than 24h`},
	{"soak number", "soak: 1h30m", "soak: 30", "waves[2].soak: want a string, got a number"},
	{"gate", "gate: approval", "gate: manual", `waves[2].gate: "manual", want "auto" or "approval"`},
	// §2.3 the fleet's rules
	{"target name twice", "- name: prod-b\n", "- name: prod-a\n", `targets[3].name: "prod-a" is also the name of targets[2]`},
	{"one Head twice", "context: prod-b", "context: prod-a", `targets[3]: its kubeconfig "", context "prod-a" and namespace "ql3-demo" are those of targets[2] ("prod-a")`},
	{"wave name twice", "- name: staging\n", "- name: dev\n", `waves[1].name: "dev" is also the name of waves[0]`},
	{"no such target", "{names: [dev-a]}", "{names: [dev-a, prod-x]}", `waves[0].selector.names[1]: "prod-x" is no target`},
	{"selects nothing", "matchLabels: {ring: staging}", "matchLabels: {ring: stage}", "waves[1].selector.matchLabels: selects no target"},
	{"in two waves", "{names: [dev-a]}", "{names: [dev-a, prod-b]}", `waves[2].selector: selects "prod-b", which waves[0] ("dev") selects too`},
	{"in no wave", "{matchLabels: {ring: prod}}", "{matchLabels: {region: eu}}", `targets[3]: "prod-b" is in no wave; select it in exactly one wave`},
}

// TestParseRules breaks each rule of docs/fleet.md once, by one edit of
// goodYAML, and requires exit 2 naming the field.
func TestParseRules(t *testing.T) {
	for _, tc := range ruleCases {
		t.Run(tc.name, func(t *testing.T) {
			src := goodYAML + tc.new
			if whole, ok := wholeDocs[tc.name]; ok {
				src = whole
			} else if tc.old != "" {
				if n := strings.Count(goodYAML, tc.old); n != 1 {
					t.Fatalf("%q occurs %d times in goodYAML", tc.old, n)
				}
				src = strings.Replace(goodYAML, tc.old, tc.new, 1)
			}
			_, err := Parse("/fleet", []byte(src))
			if !fail.Is(err, fail.Invalid) {
				t.Fatalf("want invalid, got %v", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q lacks %q", err, tc.want)
			}
		})
	}
}

// The bounds: a file over MaxFileBytes is refused unread, a fleet of more
// than MaxTargets targets is refused, one of exactly MaxTargets accepted.
func TestParseBounds(t *testing.T) {
	big := goodYAML + "#" + strings.Repeat("x", MaxFileBytes-len(goodYAML)-1) + "\n"
	if _, err := Parse("/fleet", []byte(big)); !fail.Is(err, fail.Invalid) || !strings.Contains(err.Error(), "the file is 1048577 bytes, at most 1048576 are allowed") {
		t.Fatalf("a file over the bound: %v", err)
	}
	fleet := func(n int) []byte {
		var b strings.Builder
		b.WriteString("schema: kubectl-ql3/fleet@v1\ntargets:\n")
		for i := range n {
			fmt.Fprintf(&b, "- {name: t%d, namespace: ns%d, release: r, labels: {all: \"yes\"}}\n", i, i)
		}
		b.WriteString("waves:\n- {name: all, selector: {matchLabels: {all: \"yes\"}}, maxParallel: 1000}\n")
		return []byte(b.String())
	}
	f, err := Parse("/fleet", fleet(MaxTargets))
	if err != nil || len(f.Waves[0].Targets) != MaxTargets {
		t.Fatalf("a fleet of %d targets: %v", MaxTargets, err)
	}
	if _, err := Parse("/fleet", fleet(MaxTargets+1)); !fail.Is(err, fail.Invalid) || !strings.Contains(err.Error(), "targets: has 1001 entries, at most 1000 are allowed") {
		t.Fatalf("a fleet of %d targets: %v", MaxTargets+1, err)
	}
}
