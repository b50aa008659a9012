package audit

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/qinglong/kubectl-ql3/internal/fail"
)

func audit(t *testing.T, dir string, mode Mode) *Report {
	t.Helper()
	r, err := Audit(filesys.MakeFsOnDisk(), "testdata/"+dir, mode)
	if err != nil {
		t.Fatalf("audit %s: %v", dir, err)
	}
	return r
}

func rulesOf(r *Report) []string {
	var out []string
	for _, f := range r.Findings {
		if !slices.Contains(out, f.Rule) {
			out = append(out, f.Rule)
		}
	}
	return out
}

// The clean releases pass every rule; the base passes as base only (its
// identity generation is the placeholder).
func TestCleanRelease(t *testing.T) {
	if r := audit(t, "base", Base); len(r.Findings) != 0 || len(r.Checked) != len(rules) {
		t.Fatalf("base: %+v", r)
	}
	if r := audit(t, "deployable", Deployable); len(r.Findings) != 0 {
		t.Fatalf("deployable: %+v", r.Findings)
	}
	r := audit(t, "base", Deployable)
	if got := rulesOf(r); !slices.Equal(got, []string{"identity-generation"}) {
		t.Fatalf("base as deployable: %v", r.Findings)
	}
}

// Every rule has a fixture under testdata/rules that breaks it and no other.
func TestRuleFixtures(t *testing.T) {
	for _, ru := range rules {
		t.Run(ru.Name, func(t *testing.T) {
			if _, err := os.Stat("testdata/rules/" + ru.Name); err != nil {
				t.Fatalf("no fixture for rule %s", ru.Name)
			}
			r := audit(t, "rules/"+ru.Name, Base)
			if got := rulesOf(r); !slices.Equal(got, []string{ru.Name}) {
				b, _ := json.MarshalIndent(r.Findings, "", "  ")
				t.Fatalf("findings of rules %v, want only %s:\n%s", got, ru.Name, b)
			}
			for _, f := range r.Findings {
				if f.Expected == "" || f.Found == "" {
					t.Errorf("finding without expected/found: %+v", f)
				}
			}
		})
	}
}

// Live: the five annotations publish adds are allowed all together, not
// partly; the placeholder is not.
func TestLive(t *testing.T) {
	rel := audit(t, "deployable", Deployable)
	_ = rel
	objs := renderObjs(t, "deployable")
	tmpl := objs.template(t)
	for _, k := range []string{"qinglong.io/worker-credential-delivery-id", "qinglong.io/worker-credential-id", "qinglong.io/worker-deployment-generation", "qinglong.io/worker-credential-token-digest", "qinglong.io/worker-credential-publication-digest"} {
		tmpl[k] = "x"
	}
	objs.setTemplate(t, tmpl)
	if r := Check("live", objs.list, Live); len(r.Findings) != 0 {
		t.Fatalf("live with five annotations: %+v", r.Findings)
	}
	if r := Check("live", objs.list, Deployable); !slices.Equal(rulesOf(r), []string{"credential-annotations"}) {
		t.Fatalf("deployable with five annotations: %+v", r.Findings)
	}
	delete(tmpl, "qinglong.io/worker-credential-id")
	objs.setTemplate(t, tmpl)
	if r := Check("live", objs.list, Live); !slices.Equal(rulesOf(r), []string{"credential-annotations"}) {
		t.Fatalf("live with four annotations: %+v", r.Findings)
	}
}

func TestAuditModes(t *testing.T) {
	if _, err := Audit(filesys.MakeFsOnDisk(), "testdata/base", Live); !fail.Is(err, fail.Invalid) {
		t.Fatalf("rendered release as live: %v", err)
	}
	if _, err := Audit(filesys.MakeFsOnDisk(), "testdata/missing", Base); !fail.Is(err, fail.Invalid) || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("missing dir: %v", err)
	}
}
