// Package operation audits the optional plugin package management operation
// (ADR-0145) offline: it renders the operation's kustomization with the
// project's in-process kustomize (package inventory) and checks the rendered
// objects against a table of named rules. Every rule, its name and where it
// comes from are in docs/operation-audit.md.
//
// The package never talks to a cluster: it imports no client-go.
package operation

import (
	"slices"

	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/manifestaudit"
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

// Finding is one rule violation; its rule names are
// docs/operation-audit.md's. A finding about a kustomization file names
// the file relative to the repository root (or to DIR without one).
type Finding = manifestaudit.Finding

// Report is the result of an audit.
type Report struct {
	Dir      string `json:"dir"`
	Mode     Mode   `json:"mode"`
	RepoRoot string `json:"repoRoot,omitempty"`
	// Shape is the availability shape of the management Deployment.
	Shape Shape `json:"shape"`
	// Checked are the rules that ran and NotChecked those that did not
	// run in this mode or without --repo-root, in table order; Findings
	// are every violation, by rule in table order, then in the order the
	// rule found them.
	manifestaudit.Result
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
	withRepo := s.repo != nil
	res := manifestaudit.RunSome(rules, s, func(r Rule) (manifestaudit.Rule[*subject], bool) {
		return r.Rule, r.applies(mode, withRepo)
	})
	return &Report{Dir: dir, Mode: mode, RepoRoot: opts.RepoRoot, Shape: s.shape(), Result: res}, nil
}

// Rule is one named check over the rendered operation and where it runs.
type Rule struct {
	manifestaudit.Rule[*subject]
	// Modes are the modes the rule runs in.
	Modes []Mode
	// NeedsRepo means the rule runs only with Options.RepoRoot.
	NeedsRepo bool
}

func (r Rule) applies(m Mode, repo bool) bool {
	return slices.Contains(r.Modes, m) && (repo || !r.NeedsRepo)
}

// Rules is the rule table, in report order. The returned slice is a copy.
func Rules() []Rule { return slices.Clone(rules) }
