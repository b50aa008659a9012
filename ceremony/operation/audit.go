// Package operation audits the optional plugin package management operation
// (ADR-0145) offline: it renders the operation's kustomization with the
// project's in-process kustomize (package inventory) and checks the rendered
// objects against a table of named rules. Every rule, its name and where it
// comes from are in docs/operation-audit.md.
//
// The package never talks to a cluster: it imports no client-go.
package operation

import (
	"fmt"
	"path/filepath"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory"
)

// Mode is what the audited tree is meant to be.
type Mode string

const (
	// Committed is the shape kept in the repository: the admin image carries
	// the all-zero placeholder digest and nothing references the operation.
	Committed Mode = "committed"
	// Deployable is the shape a deployment controller applies: a real
	// admin image digest and the management switch explicitly on.
	Deployable Mode = "deployable"
)

// Shape is the availability shape of the rendered Deployment.
type Shape string

const (
	// Production is the reviewed two-replica shape (or any shape other than
	// one replica).
	Production Shape = "production"
	// Development is a single-replica development patch: never evidence of
	// the production HA shape.
	Development Shape = "development-single-replica"
	// Unknown means no single management Deployment was found.
	Unknown Shape = "unknown"
)

// Options tune Audit.
type Options struct {
	// Mode selects the committed or the deployable rules; empty means
	// Committed.
	Mode Mode
	// RepoRoot, when set, is the repository checkout holding DIR: every
	// kustomization under it is read to check that none references the
	// operation (committed mode) and none lists a committed example.
	RepoRoot string
}

// Finding is one rule violation.
type Finding struct {
	// Rule is the stable rule name (docs/operation-audit.md).
	Rule string `json:"rule"`
	// Object is the rendered object the finding is about; nil for a
	// finding about a kustomization file.
	Object *inventory.Identity `json:"object,omitempty"`
	// File is the kustomization file the finding is about, relative to the
	// repository root (or to DIR without one), slash-separated.
	File string `json:"file,omitempty"`
	// Path locates the field: dotted field names with [index] for list
	// items, as in spec.template.spec.containers[0].image; "" is the whole
	// object or file.
	Path string `json:"path"`
	// Expected and Found say what the rule wants and what is there.
	Expected string `json:"expected"`
	Found    string `json:"found"`
}

// Report is the result of an audit.
type Report struct {
	Dir      string `json:"dir"`
	Mode     Mode   `json:"mode"`
	RepoRoot string `json:"repoRoot,omitempty"`
	// Shape is the availability shape of the management Deployment.
	Shape Shape `json:"shape"`
	// Checked are the rules that ran, in table order.
	Checked []string `json:"checked"`
	// NotChecked are the rules that did not run in this mode or without
	// --repo-root, in table order.
	NotChecked []string `json:"notChecked"`
	// Findings are every violation, by rule in table order, then in the
	// order the rule found them.
	Findings []Finding `json:"findings"`
}

// Audit renders the operation in dir on fsys and checks it. Problems that
// stop the audit (no kustomization, a kustomize error, an unreadable
// repository) are fail.Invalid errors; rule violations are findings, and a
// report with findings is not an error.
func Audit(fsys filesys.FileSystem, dir string, opts Options) (*Report, error) {
	mode := opts.Mode
	if mode == "" {
		mode = Committed
	}
	if mode != Committed && mode != Deployable {
		return nil, fail.Errorf(fail.Invalid, "audit mode %q is not %q or %q", mode, Committed, Deployable)
	}
	rel, err := inventory.Render(fsys, dir, inventory.Options{UnpinnedImages: true})
	if err != nil {
		return nil, err
	}
	s := newSubject(rel, mode)
	if opts.RepoRoot != "" {
		repo, err := readRepo(fsys, opts.RepoRoot, dir, rel)
		if err != nil {
			return nil, err
		}
		s.repo = repo
	}
	r := &Report{Dir: dir, Mode: mode, RepoRoot: opts.RepoRoot, Shape: s.shape(), Checked: []string{}, NotChecked: []string{}, Findings: []Finding{}}
	for _, ru := range Rules() {
		if !ru.applies(mode, s.repo != nil) {
			r.NotChecked = append(r.NotChecked, ru.Name)
			continue
		}
		r.Checked = append(r.Checked, ru.Name)
		for _, f := range ru.check(s) {
			f.Rule = ru.Name
			r.Findings = append(r.Findings, f)
		}
	}
	return r, nil
}

// Rule is one named check over the rendered operation.
type Rule struct {
	// Name is the stable identifier findings carry.
	Name string
	// Summary says what the rule checks, in one line.
	Summary string
	// Modes are the modes the rule runs in.
	Modes []Mode
	// NeedsRepo means the rule runs only with Options.RepoRoot.
	NeedsRepo bool

	check func(*subject) []Finding
}

func (r Rule) applies(m Mode, repo bool) bool {
	return slices.Contains(r.Modes, m) && (repo || !r.NeedsRepo)
}

// Rules is the rule table, in report order. The returned slice is a copy.
func Rules() []Rule { return slices.Clone(rules) }

// at is a finding about a rendered object.
func at(u *unstructured.Unstructured, path, expected, found string) Finding {
	id := identityOf(u)
	return Finding{Object: &id, Path: path, Expected: expected, Found: found}
}

func identityOf(u *unstructured.Unstructured) inventory.Identity {
	return inventory.Identity{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName()}
}

// inFile is a finding about a kustomization file.
func inFile(file, path, expected, found string) Finding {
	return Finding{File: filepath.ToSlash(file), Path: path, Expected: expected, Found: found}
}

// quote renders a found value; "" reads as <unset>.
func quote(s string) string {
	if s == "" {
		return "<unset>"
	}
	return fmt.Sprintf("%q", s)
}
