// Package audit audits a Worker release (ADR-0239, docs/worker.md, "The
// audit"): the rendered objects of a kustomization (offline, rendered with
// the project's in-process kustomize, package inventory) or the live
// objects a caller read, against a table of named rules, one finding per
// violated rule and place.
//
// The package never talks to a cluster: it imports no client-go.
package audit

import (
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/manifestaudit"
	"github.com/qinglong/kubectl-ql3/inventory"
)

// Mode is what the audited objects are meant to be.
type Mode string

const (
	// Base is the committed base: the identity generation may still be the
	// placeholder.
	Base Mode = "base"
	// Deployable is a private overlay about to be applied: the identity
	// generation must be a real one.
	Deployable Mode = "deployable"
	// Live is the objects read from a cluster: like Deployable, except that
	// the PodTemplate may carry the five credential annotations publish
	// adds (all five or none).
	Live Mode = "live"
)

// Finding is one rule violation; its rule names are docs/worker.md's.
type Finding = manifestaudit.Finding

// Report is the result of an audit.
type Report struct {
	Source string `json:"source"`
	Mode   Mode   `json:"mode"`
	// Checked are the rules that ran, in table order; Findings are every
	// violation, by rule in table order.
	manifestaudit.Result
}

// Rule is one named check.
type Rule = manifestaudit.Rule[*subject]

// Rules is the rule table, in report order (a copy).
func Rules() []Rule { return slices.Clone(rules) }

// Audit renders the kustomization dir on fsys and checks it in mode (Base
// or Deployable). Secrets with data are admitted (only their keys are
// read; values are redacted by the render). A render error is
// fail.Invalid; violations are findings.
func Audit(fsys filesys.FileSystem, dir string, mode Mode) (*Report, error) {
	if mode != Base && mode != Deployable {
		return nil, fail.Errorf(fail.Invalid, "audit mode %q: a rendered release is audited as %q or %q", mode, Base, Deployable)
	}
	rel, err := inventory.Render(fsys, dir, inventory.Options{UnpinnedImages: true, AllowSecretData: true})
	if err != nil {
		return nil, err
	}
	return Check(dir, rel.Objects, mode), nil
}

// Check audits objs (rendered or read live) in mode.
func Check(source string, objs []*unstructured.Unstructured, mode Mode) *Report {
	return &Report{Source: source, Mode: mode, Result: manifestaudit.Run(rules, newSubject(objs, mode))}
}
