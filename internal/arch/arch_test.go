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
	{"the offline auditor, the renderer, pure formats and manifest audits carry no cluster code", []string{"receipts", "inventory", "formats", "audits"},
		[]string{"k8s.io/client-go", "cas"}, nil},
	{"the offline auditor and pure formats carry no renderer", []string{"receipts", "formats"},
		[]string{"sigs.k8s.io/kustomize", "inventory"}, []string{"inventory/canon"}},
	{"pure formats are leaves", []string{"formats"},
		[]string{"ceremony", "receipts", "audits", "pointer", "worker", "keyledger", "envbundle"}, nil},
	{"test machinery never ships", []string{""},
		[]string{"internal/testcluster", "internal/faults", "internal/importtest"}, []string{"internal/testcluster", "internal/faults", "internal/importtest"}},
}

func under(path string, prefixes []string) bool {
	rel, inModule := strings.CutPrefix(path, mod+"/")
	for _, p := range prefixes {
		switch {
		case strings.Contains(p, "."): // an external module
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
