// Package manifestaudit is the one engine of the project's offline manifest
// audits (the management operation, ceremony/operation; the Worker release,
// ceremony/worker/audit): a table of named rules run in order over a
// subject the audit decoded once, one finding per violated rule and place.
//
// The engine knows no rule and no object shape: each audit keeps its
// subject, its rules, its modes and the header of its report. It is a leaf:
// no client-go, no renderer, nothing of a ceremony.
package manifestaudit

import (
	"fmt"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

// Finding is one rule violation.
type Finding struct {
	// Rule is the stable rule name (the audit's doc lists them).
	Rule string `json:"rule"`
	// Object is the object the finding is about; nil for a finding about a
	// file or about the objects as a whole.
	Object *canon.Identity `json:"object,omitempty"`
	// File is the file the finding is about (a kustomization), relative to
	// the root the audit names, slash-separated; "" for an object.
	File string `json:"file,omitempty"`
	// Path locates the field: dotted field names with [index] for list
	// items, as in spec.template.spec.containers[0].image; "" is the whole
	// object or file.
	Path string `json:"path"`
	// Expected and Found say what the rule wants and what is there.
	Expected string `json:"expected"`
	Found    string `json:"found"`
}

// Rule is one named check over a subject S.
type Rule[S any] struct {
	// Name is the stable identifier findings carry.
	Name string
	// Summary says what the rule checks, in one line.
	Summary string

	check func(S) []Finding
}

// NewRule names check.
func NewRule[S any](name, summary string, check func(S) []Finding) Rule[S] {
	return Rule[S]{Name: name, Summary: summary, check: check}
}

// Result is what the rules of one audit found; an audit's report embeds it
// after its own header.
type Result struct {
	// Checked are the rules that ran, in table order.
	Checked []string `json:"checked"`
	// NotChecked are the rules that did not run (an audit whose rules
	// depend on its mode or options), in table order. Nil for an audit
	// whose rules always all run: it is then left out of the report.
	NotChecked []string `json:"notChecked,omitzero"`
	// Findings are every violation, by rule in table order, then in the
	// order the rule found them.
	Findings []Finding `json:"findings"`
}

// Run runs every rule of table over s, in table order.
func Run[S any](table []Rule[S], s S) Result {
	res := Result{Checked: []string{}, Findings: []Finding{}}
	for _, r := range table {
		r.apply(s, &res)
	}
	return res
}

// RunSome runs over s, in table order, the entries of table that pick says
// run, and lists the others as not checked (an empty list when every entry
// runs). pick gives an entry's rule and whether it runs: an audit whose
// rules depend on its mode or options keeps its own table entries.
func RunSome[E, S any](table []E, s S, pick func(E) (Rule[S], bool)) Result {
	res := Result{Checked: []string{}, NotChecked: []string{}, Findings: []Finding{}}
	for _, e := range table {
		r, runs := pick(e)
		if !runs {
			res.NotChecked = append(res.NotChecked, r.Name)
			continue
		}
		r.apply(s, &res)
	}
	return res
}

// apply runs r over s: r is checked, its findings carry its name.
func (r Rule[S]) apply(s S, res *Result) {
	res.Checked = append(res.Checked, r.Name)
	for _, f := range r.check(s) {
		f.Rule = r.Name
		res.Findings = append(res.Findings, f)
	}
}

// At is a finding about object u; a nil u is a finding about the objects
// as a whole.
func At(u *unstructured.Unstructured, path, expected, found string) Finding {
	if u == nil {
		return Finding{Path: path, Expected: expected, Found: found}
	}
	id := IdentityOf(u)
	return Finding{Object: &id, Path: path, Expected: expected, Found: found}
}

// InFile is a finding about a file.
func InFile(file, path, expected, found string) Finding {
	return Finding{File: filepath.ToSlash(file), Path: path, Expected: expected, Found: found}
}

// Workload reports whether u is of a kind that runs pods: a Deployment, a
// Pod, a ReplicationController, a StatefulSet, a DaemonSet, a ReplicaSet, a
// Job or a CronJob (any version).
func Workload(u *unstructured.Unstructured) bool {
	switch gk := u.GroupVersionKind().GroupKind(); gk.Group + "/" + gk.Kind {
	case "apps/Deployment", "/Pod", "/ReplicationController", "apps/StatefulSet", "apps/DaemonSet", "apps/ReplicaSet", "batch/Job", "batch/CronJob":
		return true
	}
	return false
}

// IdentityOf is the identity of u.
func IdentityOf(u *unstructured.Unstructured) canon.Identity {
	return canon.Identity{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName()}
}

// Quote writes a found value: quoted, or <unset> for "".
func Quote(v string) string {
	if v == "" {
		return "<unset>"
	}
	return fmt.Sprintf("%q", v)
}
