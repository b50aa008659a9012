package operation

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// tableRows returns the first cells (and the rows) of the markdown table
// rows in section heading of docs/operation-audit.md.
func tableRows(t *testing.T, heading string) [][]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "operation-audit.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("docs/operation-audit.md has no %q section", heading)
	}
	if i := strings.Index(section, "\n#"); i >= 0 {
		section = section[:i]
	}
	var rows [][]string
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		var cells []string
		for _, c := range strings.Split(strings.Trim(line, "|"), " | ") {
			cells = append(cells, strings.TrimSpace(c))
		}
		rows = append(rows, cells)
	}
	return rows
}

// The documented rule table is the code's, in the same order, with the
// same modes.
func TestDocumentedRules(t *testing.T) {
	rows := tableRows(t, "## Rules")
	var names []string
	for _, r := range rows {
		names = append(names, strings.Trim(r[0], "`"))
	}
	var want []string
	for _, r := range Rules() {
		want = append(want, r.Name)
	}
	if !slices.Equal(names, want) {
		t.Fatalf("documented rules %q\n want %q", names, want)
	}
	for i, r := range Rules() {
		mode := rows[i][1]
		ok := strings.HasPrefix(mode, "both") == slices.Equal(r.Modes, both) &&
			strings.HasPrefix(mode, "committed") == slices.Equal(r.Modes, []Mode{Committed}) &&
			strings.HasPrefix(mode, "deployable") == slices.Equal(r.Modes, []Mode{Deployable}) &&
			strings.Contains(mode, "--repo-root") == r.NeedsRepo
		if !ok {
			t.Errorf("rule %q: documented mode %q, code %q (needs repo %t)", r.Name, mode, r.Modes, r.NeedsRepo)
		}
	}
}

// The documented environment values are the code's.
func TestDocumentedEnvironment(t *testing.T) {
	var got []string
	for _, r := range tableRows(t, "### Environment") {
		name, _, _ := strings.Cut(strings.Trim(r[1], "`"), "`")
		got = append(got, strings.Trim(r[0], "`")+" "+name+"="+strings.Trim(r[2], "`"))
	}
	var want []string
	for _, s := range limitEnv {
		want = append(want, "limits "+s.name+"="+s.value)
	}
	for _, s := range quotaEnv {
		want = append(want, "quotas "+s.name+"="+s.value)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("documented environment %q\n want %q", got, want)
	}
}
