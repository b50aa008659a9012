package plugin_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/plugin"
)

// A kubeconfig that cannot be loaded, or names no such context, is invalid
// input for every command that reads it: exit 2 and one `error:` line
// saying "kubeconfig: …" (head once returned these unclassified: exit 1).
func TestKubeconfigErrorsAreInvalid(t *testing.T) {
	dir := t.TempDir()
	broken := filepath.Join(dir, "broken.yaml")
	if err := os.WriteFile(broken, []byte("apiVersion: v1\nkind: Config\nclusters: [oops\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	badServer := filepath.Join(dir, "badserver.yaml")
	if err := os.WriteFile(badServer, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://[::1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: ctx, context: {cluster: c, user: u, namespace: ns1}}]
current-context: ctx
`), 0o600); err != nil {
		t.Fatal(err)
	}
	release := fixtureDir("v3.0.0")
	brokenEnv := []string{"KUBECONFIG=" + broken}
	tests := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"head, unreadable kubeconfig", brokenEnv, []string{"head"}, `error loading config file`},
		{"head -n, unreadable kubeconfig", brokenEnv, []string{"head", "-n", "ns"}, `error loading config file`},
		{"head -o jsonpath, unreadable kubeconfig", brokenEnv, []string{"head", "-o", "jsonpath={.expectedHead}"}, `error loading config file`},
		{"head, missing --kubeconfig", nil, []string{"head", "--kubeconfig", filepath.Join(dir, "absent")}, "no such file or directory"},
		{"head, no such --context", nil, []string{"head", "--context", "nope"}, `context was not found for specified context: nope`},
		{"head, bad server URL", []string{"KUBECONFIG=" + badServer}, []string{"head"}, `host must be a URL`},
		{"version", brokenEnv, []string{"version"}, `error loading config file`},
		{"lock", brokenEnv, []string{"lock", release, "--version", "3.0.0"}, `error loading config file`},
		{"render --context", brokenEnv, []string{"render", release, "--context", "x"}, `error loading config file`},
		{"rbac", brokenEnv, []string{"rbac", release}, `error loading config file`},
		{"preflight", brokenEnv, []string{"preflight", release, "--transition", "install", "--expected-head", deploy.AbsentToken}, `error loading config file`},
		{"rollback", brokenEnv, []string{"rollback", release, "--expected-head", deploy.AbsentToken}, `error loading config file`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, stderr, code := run(t, tt.env, tt.args...)
			if code != 2 || !strings.HasPrefix(stderr, "error: kubeconfig: ") || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tt.want) {
				t.Fatalf("exit %d, stderr %q; want exit 2 and one line `error: kubeconfig: …%s…`", code, stderr, tt.want)
			}
		})
	}
}

// The -o formats kubectl users type, through the built binary, across the
// ceremony: the template formats see the fields -o json prints, and
// -o name prints each command's documented names.
func TestOutputFormats(t *testing.T) {
	ns := controlNamespace(t)
	rel := releaseCopy(t, "v3.0.0", ns, "")
	work := t.TempDir()
	rdir := filepath.Join(work, "receipts")

	if got := mustRun(t, nil, "head", "-n", ns, "-o", "jsonpath={.expectedHead}"); got != deploy.AbsentToken {
		t.Fatalf("head -o jsonpath={.expectedHead} = %q, want %q", got, deploy.AbsentToken)
	}
	if got := mustRun(t, nil, "head", "-n", ns, "-o", "name"); got != "" {
		t.Fatalf("head -o name without a Head = %q, want nothing", got)
	}

	pf := filepath.Join(work, "pf.json")
	if got := mustRun(t, nil, "preflight", rel, "--transition", "install", "--expected-head", deploy.AbsentToken, "--out", pf, "-o", "name"); got != pf+"\n" {
		t.Fatalf("preflight -o name = %q, want the record path %q", got, pf)
	}
	receipt := strings.TrimSuffix(mustRun(t, nil, "apply", "--preflight", pf, "--receipts-dir", rdir, "-o", "name"), "\n")
	if filepath.Dir(receipt) != rdir || !strings.HasSuffix(receipt, ".receipt.json") {
		t.Fatalf("apply -o name = %q, want a receipt in %s", receipt, rdir)
	}
	if _, err := os.Stat(receipt); err != nil {
		t.Fatalf("apply -o name: %v", err)
	}

	var rep plugin.HeadReport
	if err := json.Unmarshal([]byte(mustRun(t, nil, "head", "-n", ns, "-o", "json")), &rep); err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		args []string
		want string
	}{
		{[]string{"head", "-n", ns, "-o", "name"}, "configmap/" + deploy.HeadName + "\n"},
		{[]string{"head", "-n", ns, "-o", "jsonpath={.expectedHead}"}, rep.ExpectedHead},
		{[]string{"head", "-n", ns, "-o", "go-template={{.head.generation}} {{.head.current.version}}"}, "1 3.0.0"},
		{[]string{"receipt", "audit", rdir, "-o", "name"}, receipt + "\n"},
		{[]string{"receipt", "audit", rdir, "-o", "jsonpath={.verdict}"}, "ok"},
		{[]string{"version", "--client", "-o", "jsonpath={.plugin.version}"}, "v0.1.0-test"},
		{[]string{"render", rel, "--inventory", "-o", "jsonpath={.controlNamespace}"}, ns},
	}
	for _, c := range checks {
		if got := mustRun(t, nil, c.args...); got != c.want {
			t.Errorf("%s = %q, want %q", strings.Join(c.args, " "), got, c.want)
		}
	}
	if rep.ExpectedHead == deploy.AbsentToken || rep.Head == nil || rep.Head.Current.Version != "3.0.0" {
		t.Fatalf("head -o json after install: %+v", rep)
	}

	// render and rbac name objects as kubectl does; render --inventory
	// names the same objects.
	name := regexp.MustCompile(`^[a-z0-9]+(\.[a-z0-9.-]+)?/[a-z0-9.-]+$`)
	objects := mustRun(t, nil, "render", rel, "-o", "name")
	lines := strings.Split(strings.TrimSuffix(objects, "\n"), "\n")
	if len(lines) < 5 || !strings.Contains(objects, "namespace/"+ns+"\n") {
		t.Fatalf("render -o name:\n%s", objects)
	}
	for _, l := range lines {
		if !name.MatchString(l) {
			t.Errorf("render -o name line %q is not kind[.group]/name", l)
		}
	}
	if inv := mustRun(t, nil, "render", rel, "--inventory", "-o", "name"); len(strings.Split(strings.TrimSuffix(inv, "\n"), "\n")) != len(lines) {
		t.Errorf("render --inventory -o name lists %q, render -o name %d objects", inv, len(lines))
	}
	roles := mustRun(t, nil, "rbac", rel, "-o", "name")
	if !strings.Contains(roles, "role.rbac.authorization.k8s.io/") {
		t.Errorf("rbac -o name:\n%s", roles)
	}

	// version has no names; a bad template fails before anything runs.
	for _, args := range [][]string{
		{"version", "--client", "-o", "name"},
		{"head", "-n", ns, "-o", "jsonpath={.expectedHead"},
		{"apply", "--preflight", pf, "-o", "go-template={{.x"},
	} {
		_, stderr, code := run(t, nil, args...)
		if code != 2 || !strings.HasPrefix(stderr, "error: --output ") || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%s: exit %d, stderr %q; want exit 2 and one `error: --output …` line", strings.Join(args, " "), code, stderr)
		}
	}
}
