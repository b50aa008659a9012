// Package arch holds the test of docs/architecture.md's import rules: who
// may import whom, checked over every package of the module (non-test
// dependencies, transitively); and that the links of README.md and docs/
// lead to files and headings that exist.
package arch

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const mod = "github.com/qinglong/kubectl-ql3"

type pkg struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

// rule: packages under one of From may not depend on any of Banned,
// except the dependencies listed in Allowed (prefix matches on paths
// relative to the module, or full import paths for external modules).
type rule struct {
	why     string
	from    []string
	banned  []string
	allowed []string
}

// The pure format leaves, each inside its ceremony's folder, and the
// manifest audits.
var (
	leaves = []string{"ceremony/package/intent", "ceremony/package/stagelayout", "ceremony/keyset/jwkset",
		"ceremony/worker/delivery", "ceremony/envbundle/envcarrier", "ceremony/approval/record",
		"ceremony/fleet/fleetfile", "ceremony/fleet/plan"}
	audits = []string{"ceremony/worker/audit", "ceremony/operation"}
	// The sibling ceremonies: each stands next to the Head and next to
	// the others, sharing only the kernel.
	siblings = []string{"ceremony/package", "ceremony/keyset", "ceremony/worker", "ceremony/envbundle", "ceremony/operation"}
)

func cat(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

var rules = append([]rule{
	{"domain packages never import the CLI", []string{"ceremony", "inventory", "receipts", "internal"},
		[]string{"plugin"}, nil},
	{"the CAS kernel knows no operation", []string{"ceremony/cas"},
		[]string{"ceremony", "inventory", "receipts"}, []string{"ceremony/cas"}},
	{"the access review and RBAC printing know no ceremony: they share only the kernel's classifier", []string{"ceremony/access"},
		[]string{"ceremony", "inventory", "receipts"}, []string{"ceremony/access", "ceremony/cas"}},
	{"nothing but the CLI and the fleet's soak builds on the read-only views", cat([]string{"inventory", "receipts", "ceremony/cas", "ceremony/access",
		"ceremony/deploy", "ceremony/approval"}, siblings, leaves),
		[]string{"ceremony/views", "ceremony/fleet"}, []string{"ceremony/fleet/fleetfile", "ceremony/fleet/plan"}},
	{"a fleet is a ceremony of ceremonies: it stands on the Head (deploy), never on the siblings", []string{"ceremony/fleet"},
		siblings, nil},
	{"sibling ceremonies stand next to the Head, not on it", siblings,
		[]string{"ceremony/deploy"}, nil},
	{"the package pointer never renders: it reads a lock and evidence", []string{"ceremony/package"},
		[]string{"sigs.k8s.io/kustomize", "third_party/kustomize-api", "inventory"}, []string{"inventory/canon"}},
	{"the offline auditor, the renderer, pure formats and manifest audits carry no cluster code", cat([]string{"receipts", "inventory"}, leaves, audits),
		[]string{"k8s.io/client-go", "ceremony/cas"}, nil},
	{"the offline auditor, the render cache and pure formats carry no renderer", cat([]string{"receipts", "inventory/rendercache"}, leaves),
		[]string{"sigs.k8s.io/kustomize", "third_party/kustomize-api", "inventory"}, []string{"inventory/canon"}},
	{"the renderer and the offline auditor link no Helm SDK: charts render through internal/helmchart, which the CLI registers", []string{"inventory", "receipts"},
		[]string{"helm.sh/helm", "internal/helmchart"}, nil},
	{"the chart renderer adapts the Helm SDK to the inventory: no ceremony, no receipts, no CLI", []string{"internal/helmchart"},
		[]string{"ceremony", "receipts", "plugin"}, nil},
	{"pure formats are leaves: no ceremony, no kernel, no receipts", leaves,
		[]string{"ceremony", "receipts"}, leaves},
	{"the stage evidence reader reads files, never the network", []string{"ceremony/package/stagelayout"},
		[]string{"std:net/http"}, nil},
	{"the environment-bundle carrier needs nothing of Kubernetes", []string{"ceremony/envbundle/envcarrier"},
		[]string{"k8s.io/", "sigs.k8s.io/", "inventory", "receipts"}, nil},
	{"the approval's format needs nothing of Kubernetes", []string{"ceremony/approval/record"},
		[]string{"k8s.io/", "sigs.k8s.io/", "inventory", "receipts"}, nil},
	{"the approval gate is what apply calls: it imports no ceremony but the kernel and its format, so ceremony/deploy can import it", []string{"ceremony/approval/gate"},
		[]string{"ceremony", "inventory", "receipts"}, []string{"ceremony/cas", "ceremony/approval/record", "ceremony/approval/gate"}},
	{"the approval ceremony stands on the Head (it reads the record and the Head as apply does), never on the sibling ceremonies or the views", []string{"ceremony/approval"},
		cat(siblings, []string{"ceremony/views"}), nil},
	{"the manifest audit engine is a leaf: no cluster code, no renderer, no ceremony", []string{"internal/manifestaudit"},
		[]string{"k8s.io/client-go", "sigs.k8s.io/kustomize", "third_party/kustomize-api", "ceremony", "inventory", "receipts"}, []string{"inventory/canon"}},
	{"the attestation envelope knows no receipt, no cluster and no renderer: every kind of evidence is sealed by it alike", []string{"internal/intoto"},
		[]string{"k8s.io/client-go", "sigs.k8s.io/kustomize", ""}, []string{"inventory/canon", "internal/fail", "internal/strictjson"}},
	{"the patched kustomize is upstream's code: it imports no package of this module but its own", []string{"third_party/kustomize-api"},
		[]string{""}, []string{"third_party/kustomize-api"}},
	{"the strict JSON reader is a leaf of the standard library", []string{"internal/strictjson"},
		[]string{"k8s.io/", "sigs.k8s.io/", ""}, nil},
	{"the OCI image archive writer is a leaf of the standard library", []string{"internal/ociarchive"},
		[]string{"k8s.io/", "sigs.k8s.io/", ""}, nil},
	{"the pod status reader is a leaf of the pod type: no client, no module package", []string{"internal/podstatus"},
		[]string{"k8s.io/client-go", "sigs.k8s.io/kustomize", ""}, nil},
	{"test machinery never ships", []string{"cmd", "plugin", "ceremony", "inventory", "receipts", "krew",
		"internal/fail", "internal/safefile", "internal/strictjson", "internal/intoto", "internal/manifestaudit", "internal/crashpoint",
		"internal/ociarchive", "internal/podstatus", "hack/imagearchive"},
		[]string{"internal/testcluster", "internal/faults", "internal/testkit", "internal/vectors", "ceremony/approval/gate/gatetest",
			"ceremony/worker/workertest", "ceremony/package/stagelayout/stagelayouttest", "ceremony/deploy/deploytest"}, nil},
}, siblingRules()...)

// siblingRules: a sibling ceremony imports no other ceremony's folder.
func siblingRules() []rule {
	var out []rule
	for _, s := range siblings {
		var others []string
		for _, o := range append([]string{"ceremony/views"}, siblings...) {
			if o != s {
				others = append(others, o)
			}
		}
		out = append(out, rule{"a ceremony's folder stands alone: it shares only the kernel", []string{s}, others, nil})
	}
	return out
}

func under(path string, prefixes []string) bool {
	rel, inModule := strings.CutPrefix(path, mod+"/")
	for _, p := range prefixes {
		switch {
		case strings.HasPrefix(p, "std:"): // a standard-library package
			std := strings.TrimPrefix(p, "std:")
			if path == std || strings.HasPrefix(path, std+"/") {
				return true
			}
		case strings.HasSuffix(p, "/") || strings.Contains(p, "."): // an external module, or every module under a host ("k8s.io/")
			if strings.HasSuffix(p, "/") && strings.HasPrefix(path, p) {
				return true
			}
			if path == p || strings.HasPrefix(path, p+"/") {
				return true
			}
		case inModule && (p == "" || rel == p || strings.HasPrefix(rel, p+"/")):
			return true
		}
	}
	return false
}

func TestImportRules(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps=false", "-json", mod+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	var pkgs []pkg
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages: too few to judge", len(pkgs))
	}
	checked := 0
	for _, r := range rules {
		for _, p := range pkgs {
			if !under(p.ImportPath, r.from) {
				continue
			}
			checked++
			for _, d := range p.Deps {
				if under(d, r.banned) && !under(d, r.allowed) {
					t.Errorf("%s depends on %s: %s", p.ImportPath, d, r.why)
				}
			}
		}
	}
	if checked < 10 {
		t.Fatalf("only %d package checks ran", checked)
	}
}

// Helm's template engine links client-go (for `lookup`), so the chart
// renderer cannot be kept from depending on it; it must never import a
// client itself, so that no render can be handed one.
func TestChartRendererBuildsNoClient(t *testing.T) {
	out, err := exec.Command("go", "list", "-json", mod+"/internal/helmchart").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var p pkg
	if err := json.Unmarshal(out, &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Imports) == 0 {
		t.Fatal("go list found no imports")
	}
	for _, i := range p.Imports {
		if under(i, []string{"k8s.io/client-go", "helm.sh/helm/v4/pkg/action", "helm.sh/helm/v4/pkg/kube"}) {
			t.Errorf("internal/helmchart imports %s: the chart renderer never builds a cluster client", i)
		}
	}
}

// The matcher the rules rest on: a rule that matched nothing would pass
// every module.
func TestUnder(t *testing.T) {
	for _, c := range []struct {
		path   string
		prefix string
		want   bool
	}{
		{mod + "/ceremony/keyset/jwkset", "ceremony/keyset", true},
		{mod + "/ceremony/keysetx", "ceremony/keyset", false},
		{mod + "/inventory/canon", "inventory", true},
		{mod + "/internal/fail", "", true},
		{"k8s.io/client-go/rest", "k8s.io/client-go", true},
		{"k8s.io/apimachinery/pkg/types", "k8s.io/", true},
		{"sigs.k8s.io/yaml", "k8s.io/", false},
		{"net/http", "std:net/http", true},
		{"net/http/httptrace", "std:net/http", true},
		{"net/url", "std:net/http", false},
		{"net/http", "net", false}, // a bare entry is module-relative
	} {
		if got := under(c.path, []string{c.prefix}); got != c.want {
			t.Errorf("under(%q, %q) = %v, want %v", c.path, c.prefix, got, c.want)
		}
	}
}
