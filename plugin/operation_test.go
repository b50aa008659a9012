package plugin_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// operationFixture is a fixture of ceremony/operation.
func operationFixture(name string) string {
	return filepath.Join("..", "ceremony", "operation", "testdata", name)
}

// kubectl ql3 operation audit, through the built binary: no cluster is
// needed (no --context), findings exit 2 after the report, clean exits 0.
func TestOperationAudit(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		code     int
		stdout   string
		stderr   string
		jsonRule string // with -o json: the one finding's rule ("" for none)
	}{
		{name: "clean committed", args: []string{operationFixture("operations/clean")}, stdout: "no findings"},
		{name: "clean deployable", args: []string{operationFixture("operations/clean-deployable"), "--deployable"}, stdout: "no findings"},
		{name: "finding table", args: []string{operationFixture("operations/seccomp")}, code: 2,
			stdout: "seccomp", stderr: "1 finding in committed mode"},
		{name: "development shape", args: []string{operationFixture("operations/development-single-replica")}, code: 2,
			stdout: "shape development-single-replica (not production HA evidence)"},
		{name: "placeholder in deployable json", args: []string{operationFixture("operations/clean"), "--deployable", "-o", "json"}, code: 2,
			jsonRule: "admin-image-placeholder"},
		{name: "repo root json", args: []string{operationFixture("repos/referenced/operations/plugin-package-management"), "--repo-root", operationFixture("repos/referenced"), "-o", "json"}, code: 2,
			jsonRule: "operation-referenced"},
		{name: "clean json", args: []string{operationFixture("operations/clean"), "-o", "json"}, jsonRule: ""},
		{name: "bad output", args: []string{operationFixture("operations/clean"), "-o", "wide"}, code: 2, stderr: `--output "wide" is not supported`},
		{name: "no kustomization", args: []string{t.TempDir()}, code: 2, stderr: "has no kustomization"},
		{name: "no dir", args: nil, code: 2, stderr: "accepts 1 arg"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := run(t, nil, append([]string{"operation", "audit"}, tc.args...)...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, stdout, stderr)
			}
			if !strings.Contains(stdout, tc.stdout) || !strings.Contains(stderr, tc.stderr) {
				t.Errorf("stdout %q (want %q), stderr %q (want %q)", stdout, tc.stdout, stderr, tc.stderr)
			}
			if !strings.Contains(strings.Join(tc.args, " "), "-o json") {
				return
			}
			var rep struct {
				Mode     string   `json:"mode"`
				Shape    string   `json:"shape"`
				Checked  []string `json:"checked"`
				Findings []struct {
					Rule   string `json:"rule"`
					Object *struct {
						Kind, Name string
					} `json:"object"`
					File     string `json:"file"`
					Path     string `json:"path"`
					Expected string `json:"expected"`
					Found    string `json:"found"`
				} `json:"findings"`
			}
			if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
				t.Fatalf("-o json: %v\n%s", err, stdout)
			}
			if rep.Findings == nil || len(rep.Checked) == 0 || rep.Mode == "" || rep.Shape == "" {
				t.Errorf("-o json lacks findings, checked, mode or shape: %s", stdout)
			}
			switch {
			case tc.jsonRule == "" && len(rep.Findings) != 0:
				t.Errorf("findings %+v, want none", rep.Findings)
			case tc.jsonRule != "" && (len(rep.Findings) != 1 || rep.Findings[0].Rule != tc.jsonRule):
				t.Errorf("findings %+v, want one %q", rep.Findings, tc.jsonRule)
			case tc.jsonRule != "":
				f := rep.Findings[0]
				if f.Object == nil && f.File == "" || f.Expected == "" || f.Found == "" {
					t.Errorf("finding %+v lacks its object or file, expected or found", f)
				}
			}
		})
	}
}
