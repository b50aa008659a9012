package plugin_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Usage errors that cobra itself detects (missing required flags, too many
// positional arguments) are invalid input, exit 2, like every other bad
// flag — found by the reliability campaign's bad-input corpus, where they
// exited 1.
func TestUsageErrorsAreInvalid(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		stderr string
	}{
		{"apply without --preflight", []string{"apply"}, `required flag(s) "preflight" not set`},
		{"preflight without --transition", []string{"preflight", "dir", "--expected-head", "ql3h1-0-none"}, `required flag(s) "transition" not set`},
		{"preflight without --expected-head", []string{"preflight", "dir", "--transition", "install"}, `required flag(s) "expected-head" not set`},
		{"apply with two directories", []string{"apply", "--preflight", "pf.json", "a", "b"}, "accepts at most 1 arg(s), received 2"},
		{"resume with two directories", []string{"resume", "--preflight", "pf.json", "a", "b"}, "accepts at most 1 arg(s), received 2"},
		{"rollback without --expected-head", []string{"rollback", "dir"}, `required flag(s) "expected-head" not set`},
		{"propose without --preflight", []string{"propose"}, `required flag(s) "preflight" not set`},
		{"reject without --reason", []string{"reject", "--preflight", "pf.json"}, `required flag(s) "reason" not set`},
		{"rbac without DIR or --role", []string{"rbac"}, "rbac takes the release DIR (or --role proposer|approver|executor-approval without DIR)"},
		{"rbac --role with DIR", []string{"rbac", "dir", "--role", "proposer"}, `--role "proposer" takes no DIR`},
		{"rbac with an unknown role", []string{"rbac", "--role", "boss", "-n", "x"}, `--role "boss", want one of`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, stderr, code := run(t, nil, tt.args...)
			if code != 2 || !strings.HasPrefix(stderr, "error: ") || !strings.Contains(stderr, tt.stderr) || strings.Count(stderr, "error: ") != 1 {
				t.Fatalf("exit %d, stderr %q; want exit 2 and one `error: ` line with %q", code, stderr, tt.stderr)
			}
		})
	}
}

// `kubectl ql3 --help` lists the commands by what they are: the deployment
// ceremony, the read-only views, the sibling ceremonies, the offline audits
// and the rest — every command in exactly one group.
func TestHelpGroups(t *testing.T) {
	out, stderr, code := run(t, nil, "--help")
	if code != 0 {
		t.Fatalf("--help: exit %d\n%s", code, stderr)
	}
	want := map[string][]string{
		"Deployment ceremony (the Head):":            {"apply", "fleet", "head", "lock", "preflight", "rbac", "resume", "rollback"},
		"Two-person rule (approval of a preflight):": {"approval", "approve", "propose", "reject"},
		"Read-only views:":                           {"diff", "history", "render", "status"},
		"Sibling ceremonies:":                        {"env-bundle", "keyset", "operation", "package", "worker"},
		"Offline audits:":                            {"receipt"},
		"Other commands:":                            {"cache", "completion", "help", "version"},
	}
	got := map[string][]string{}
	title := ""
	for _, line := range strings.Split(out, "\n") {
		switch {
		case line == "":
			title = ""
		case !strings.HasPrefix(line, " "):
			title = line
		case want[title] != nil:
			got[title] = append(got[title], strings.Fields(line)[0])
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("--help groups (-want +got):\n%s\n%s", diff, out)
	}
	if strings.Contains(out, "Additional Commands:") || strings.Contains(out, "Available Commands:") {
		t.Errorf("a command is outside every group:\n%s", out)
	}
}
