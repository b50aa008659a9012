package envcarrier

import (
	"fmt"
	"strings"
)

// MergeReport is what a bundle merged into a task's own environment would
// be, in counts only (no name, no value).
type MergeReport struct {
	// BundleEntries is the number of the bundle's entries.
	BundleEntries int `json:"bundleEntries"`
	// TaskNames is the number of the task's own variable names.
	TaskNames int `json:"taskNames"`
	// Collisions is the number of task names that are also bundle names.
	Collisions int `json:"collisions"`
	// MergedEntries is the number of distinct names in the merged
	// environment.
	MergedEntries int `json:"mergedEntries"`
	// MergedNameValueBytesAtLeast is the bundle's names and values plus
	// the task names not in the bundle, in bytes: a lower bound of the
	// merged environment's size, since the task's own values are not known
	// here (the worker checks the final size again).
	MergedNameValueBytesAtLeast int `json:"mergedNameValueBytesAtLeast"`
}

// CheckMerge merges b with taskNames (distinct names, as ParseNames
// returns them) and reports, in one fail.Invalid *Error listing every
// broken rule, a collision or a merged environment over MaxEntries
// entries or MaxNameValueBytes bytes. The report is filled in either way.
func CheckMerge(b *Bundle, taskNames []string) (MergeReport, error) {
	r := MergeReport{BundleEntries: b.Len(), TaskNames: len(taskNames), MergedNameValueBytesAtLeast: b.NameValueBytes()}
	in := make(map[string]bool, b.Len())
	for _, e := range b.entries {
		in[e.Name] = true
	}
	for _, n := range taskNames {
		if in[n] {
			r.Collisions++
			continue
		}
		r.MergedNameValueBytesAtLeast += len(n)
	}
	r.MergedEntries = r.BundleEntries + r.TaskNames - r.Collisions
	var problems []string
	var first Rule
	add := func(rule Rule, format string, args ...any) {
		if first == "" {
			first = rule
		}
		problems = append(problems, fmt.Sprintf(format, args...))
	}
	if r.Collisions > 0 {
		add(RuleCollision, "%d of the task's %d names are also bundle names; rename them in the task or the bundle", r.Collisions, r.TaskNames)
	}
	if r.MergedEntries > MaxEntries {
		add(RuleMergedEntries, "the merged environment has %d entries, more than %d", r.MergedEntries, MaxEntries)
	}
	if r.MergedNameValueBytesAtLeast > MaxNameValueBytes {
		add(RuleMergedNameValue, "the merged environment's names and values are at least %d bytes, more than %d (64 KiB)", r.MergedNameValueBytesAtLeast, MaxNameValueBytes)
	}
	if first == "" {
		return r, nil
	}
	return r, invalid(first, "", "%s", strings.Join(problems, "; "))
}
