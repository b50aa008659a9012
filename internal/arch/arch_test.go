// Package arch holds the test of docs/architecture.md's import rules: who
// may import whom, checked over every package of the module (non-test
// dependencies, transitively).
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

var rules = []rule{
	{"domain packages never import the CLI", []string{"cas", "ceremony", "inventory", "receipts", "formats", "audits", "pointer", "worker", "keyledger", "envbundle", "views", "internal"},
		[]string{"plugin"}, nil},
	{"the CAS kernel knows no operation", []string{"cas"},
		[]string{"ceremony", "inventory", "receipts", "formats", "audits", "pointer", "worker", "keyledger", "envbundle", "views"}, nil},
	{"nothing but the CLI builds on the read-only views", []string{"cas", "ceremony", "inventory", "receipts", "formats", "audits", "pointer", "worker", "keyledger", "envbundle"},
		[]string{"views"}, nil},
	{"sibling operations stand next to the Head, not on it", []string{"pointer", "worker", "keyledger", "envbundle"},
		[]string{"ceremony"}, nil},
	{"the package pointer never renders: it reads a lock and evidence", []string{"pointer"},
		[]string{"sigs.k8s.io/kustomize", "inventory"}, []string{"inventory/canon"}},
	{"the offline auditor, the renderer, pure formats and manifest audits carry no cluster code", []string{"receipts", "inventory", "formats", "audits"},
		[]string{"k8s.io/client-go", "cas"}, nil},
	{"the offline auditor, the render cache and pure formats carry no renderer", []string{"receipts", "inventory/rendercache", "formats"},
		[]string{"sigs.k8s.io/kustomize", "inventory"}, []string{"inventory/canon"}},
	{"pure formats are leaves", []string{"formats"},
		[]string{"ceremony", "receipts", "audits", "pointer", "worker", "keyledger", "envbundle"}, nil},
	{"the stage evidence reader reads files, never the network", []string{"formats/ocistage"},
		[]string{"std:net/http"}, nil},
	{"the environment-bundle carrier needs nothing of Kubernetes", []string{"formats/envcarrier"},
		[]string{"k8s.io/", "sigs.k8s.io/", "inventory", "receipts"}, nil},
	{"the strict JSON reader is a leaf of the standard library", []string{"formats/strictjson"},
		[]string{"k8s.io/", "sigs.k8s.io/", ""}, nil},
	{"test machinery never ships", []string{""},
		[]string{"internal/testcluster", "internal/faults"}, []string{"internal/testcluster", "internal/faults"}},
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
			if !under(p.ImportPath, r.from) || under(p.ImportPath, r.allowed) {
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

// The matcher the rules rest on: a rule that matched nothing would pass
// every module.
func TestUnder(t *testing.T) {
	for _, c := range []struct {
		path   string
		prefix string
		want   bool
	}{
		{mod + "/formats/keyset", "formats", true},
		{mod + "/formatsx", "formats", false},
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
