package plugin_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qinglong/kubectl-ql3/ceremony/envbundle"
	"github.com/qinglong/kubectl-ql3/ceremony/envbundle/envcarrier"
	"github.com/qinglong/kubectl-ql3/internal/faults"
	"github.com/qinglong/kubectl-ql3/internal/testkit"
)

// ebClusterRun runs the built plugin in dir against the cluster of
// kubeconfig, with a fresh TMPDIR and HOME.
func ebClusterRun(t *testing.T, dir string, env []string, args ...string) (stdout, stderr string, code int, tmp string) {
	t.Helper()
	tmp = t.TempDir()
	cmd := exec.Command(binary, args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "TMPDIR="+tmp, "HOME="+tmp, "KUBECONFIG="+cp.AdminKubeconfig), env...)
	stdout, stderr, code = testkit.Run(t, cmd)
	return stdout, stderr, code, tmp
}

func ebBundle(t *testing.T, entries ...envcarrier.Entry) string {
	t.Helper()
	b, err := envcarrier.New(entries)
	if err != nil {
		t.Fatal(err)
	}
	return string(b.Bytes())
}

// publish, inspect and rbac through the binary: the printed version is the
// next --expected-version, a replay exits 0, a stale version exits 3, and
// the printed Role bound to a user is enough for that user.
func TestEnvBundlePublishCLI(t *testing.T) {
	ns := cp.Namespace(t)
	dir := t.TempDir()
	a := ebWrite(t, dir, "a.json", ebBundle(t, envcarrier.Entry{Name: "A", Value: "1"}))
	b := ebWrite(t, dir, "b.json", ebBundle(t, envcarrier.Entry{Name: "A", Value: "2"}))

	out := mustRun(t, nil, "env-bundle", "inspect", "-n", ns, "--name", "task-env")
	if !strings.Contains(out, "secret/task-env in namespace "+ns+": absent") {
		t.Fatalf("inspect before: %s", out)
	}
	out = mustRun(t, nil, "env-bundle", "publish", a, "-n", ns, "--name", "task-env", "-o", "json")
	var rep struct {
		File, Namespace, Name, Action, ResourceVersion string
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.Action != "created" || rep.ResourceVersion == "" || rep.File != a {
		t.Fatalf("publish -o json: %+v (%v)\n%s", rep, err, out)
	}
	v1 := rep.ResourceVersion
	if got := mustRun(t, nil, "env-bundle", "inspect", "-n", ns, "--name", "task-env", "-o", "jsonpath={.present} {.resourceVersion}"); got != "true "+v1 {
		t.Fatalf("inspect -o jsonpath: %q, want %q", got, "true "+v1)
	}
	out = mustRun(t, nil, "env-bundle", "publish", a, "-n", ns, "--name", "task-env")
	if !strings.Contains(out, ": replayed, version "+v1+"\n") {
		t.Fatalf("replay printed: %s", out)
	}
	stdout, stderr, code := run(t, nil, "env-bundle", "publish", b, "-n", ns, "--name", "task-env")
	if code != 3 || stdout != "" || !strings.Contains(stderr, "--expected-version "+v1) {
		t.Fatalf("another bundle without --expected-version: exit %d, %q", code, stderr)
	}
	out = mustRun(t, nil, "env-bundle", "publish", b, "-n", ns, "--name", "task-env", "--expected-version", v1)
	if !strings.Contains(out, ": updated, version ") || !strings.Contains(out, "the next publish replacing it: --expected-version ") {
		t.Fatalf("update printed: %s", out)
	}
	if _, stderr, code = run(t, nil, "env-bundle", "publish", a, "-n", ns, "--name", "task-env", "--expected-version", v1); code != 3 || !strings.Contains(stderr, "not the --expected-version "+v1) {
		t.Fatalf("a stale --expected-version: exit %d, %q", code, stderr)
	}

	// rbac: the Role, bound to a user with no other rights, suffices.
	out = mustRun(t, nil, "env-bundle", "rbac", "-n", ns, "--name", "least-env", "--bind-user", "envpub", "-o", "json")
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list.Items) != 2 || !strings.Contains(out, "cannot be limited by name") {
		t.Fatalf("rbac -o json: %v\n%s", err, out)
	}
	cp.KubectlApply(t, out)
	kc, err := cp.Kubeconfig("envpub")
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"KUBECONFIG=" + kc}
	mustRun(t, env, "env-bundle", "publish", a, "-n", ns, "--name", "least-env")
	if _, stderr, code := run(t, env, "env-bundle", "publish", a, "-n", ns, "--name", "task-env", "--expected-version", v1); code != 2 || !strings.Contains(stderr, "lacks") || !strings.Contains(stderr, "env-bundle rbac") {
		t.Fatalf("publish of another Secret than the granted one: exit %d, %q; want 2 listing what is missing", code, stderr)
	}
	if out := mustRun(t, nil, "env-bundle", "rbac", "-n", ns, "--name", "x"); !strings.Contains(out, "kind: Role") || !strings.Contains(out, "name: ql3-env-bundle-x") {
		t.Fatalf("rbac yaml: %s", out)
	}
	for _, args := range [][]string{
		{"env-bundle", "publish", a, "-n", ns},
		{"env-bundle", "publish", a, "-n", ns, "--name", "Bad_Name"},
		{"env-bundle", "publish", "-n", ns, "--name", "x"},
		{"env-bundle", "inspect", "-n", ns},
		{"env-bundle", "inspect", "-n", ns, "--name", "x", "-o", "name"},
		{"env-bundle", "rbac", "-n", ns},
	} {
		if _, stderr, code := run(t, nil, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2: %s", args, code, stderr)
		}
	}
}

// TestEnvBundleReplacedByValidBundle pins what
// docs/guide-env-bundles.md and docs/env-bundle.md say is NOT detected as tamper: another client replaces
// the published Secret's bytes with another valid bundle. inspect reports it
// present at its new version (exit 0); publish never overwrites it unseen:
// without --expected-version, or with the version it published, it is a
// conflict (exit 3) and nothing is written.
func TestEnvBundleReplacedByValidBundle(t *testing.T) {
	ns := cp.Namespace(t)
	dir := t.TempDir()
	a := ebWrite(t, dir, "a.json", ebBundle(t, envcarrier.Entry{Name: "A", Value: "1"}))
	other := ebBundle(t, envcarrier.Entry{Name: "B", Value: "2"})
	v1 := strings.TrimSpace(mustRun(t, nil, "env-bundle", "publish", a, "-n", ns, "--name", "task-env", "-o", "jsonpath={.resourceVersion}"))

	ctx := context.Background()
	secrets := cp.Clientset().CoreV1().Secrets(ns)
	sec, err := secrets.Get(ctx, "task-env", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sec.Data = map[string][]byte{envbundle.Key: []byte(other)}
	sec, err = secrets.Update(ctx, sec, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v2 := sec.ResourceVersion

	if got := mustRun(t, nil, "env-bundle", "inspect", "-n", ns, "--name", "task-env", "-o", "jsonpath={.present} {.resourceVersion}"); got != "true "+v2 {
		t.Fatalf("inspect after a valid replacement: %q, want %q (exit 0)", got, "true "+v2)
	}
	for _, extra := range [][]string{nil, {"--expected-version", v1}} {
		args := append([]string{"env-bundle", "publish", a, "-n", ns, "--name", "task-env"}, extra...)
		if _, stderr, code := run(t, nil, args...); code != 3 {
			t.Fatalf("publish %v over a replaced bundle: exit %d, want 3: %s", extra, code, stderr)
		}
	}
	if got, err := secrets.Get(ctx, "task-env", metav1.GetOptions{}); err != nil || got.ResourceVersion != v2 || string(got.Data[envbundle.Key]) != other {
		t.Fatalf("the replaced Secret was written: %v", err)
	}
}

// The canary through the cluster commands: publish and inspect on every
// outcome and failure path, with a canary name and value in the bundle
// (and in foreign and tampered Secrets), never show either on stdout,
// stderr, in a file, in the process arguments, in the bundle Secret's
// metadata or in the API server's audit log.
func TestEnvBundlePublishCanary(t *testing.T) {
	const name = "QLCANARY_PUB_M2"
	const value = "canaryValuePub5Hq8"
	secrets := []string{name, value, strings.ToLower(name), base64.StdEncoding.EncodeToString([]byte(value)), value[3:15]}
	ns := cp.Namespace(t)
	ctx := context.Background()
	admin := cp.Clientset().CoreV1().Secrets(ns)
	dir := t.TempDir()
	good := ebBundle(t, envcarrier.Entry{Name: name, Value: value}, envcarrier.Entry{Name: name + "_B", Value: value})
	other := ebBundle(t, envcarrier.Entry{Name: name, Value: value + "2"})
	inputs := map[string]string{
		"good.json":  good,
		"other.json": other,
		"bad.json":   strings.Replace(good, ",", ", ", 1),
		"third.json": ebBundle(t, envcarrier.Entry{Name: name, Value: value + "3"}),
	}
	for n, c := range inputs {
		ebWrite(t, dir, n, c)
	}
	nobody, err := cp.Kubeconfig("ql3-nobody")
	if err != nil {
		t.Fatal(err)
	}
	version := func() string {
		s, err := admin.Get(ctx, "task-env", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return s.ResourceVersion
	}
	lost := func() []string {
		return proxied(t, ns, faults.NewDrop(faults.Write(http.MethodPut, "/namespaces/"+ns+"/secrets", envbundle.Key)).Wrap)
	}
	type step struct {
		name  string
		setup func() // before the run
		env   func() []string
		args  func() []string
		code  int
	}
	pub := func(file string, extra ...string) func() []string {
		return func() []string {
			return append([]string{"env-bundle", "publish", file, "-n", ns, "--name", "task-env"}, extra...)
		}
	}
	steps := []step{
		{"inspect absent", nil, nil, func() []string { return []string{"env-bundle", "inspect", "-n", ns, "--name", "task-env"} }, 0},
		{"publish a non-canonical file", nil, nil, pub("bad.json"), 2},
		{"publish a missing file", nil, nil, pub("none.json"), 2},
		{"publish naming a version of an absent Secret", nil, nil, pub("good.json", "--expected-version", "7"), 3},
		{"publish without rights", nil, func() []string { return []string{"KUBECONFIG=" + nobody} }, pub("good.json"), 2},
		{"publish into a missing namespace", nil, nil, func() []string {
			return []string{"env-bundle", "publish", "good.json", "-n", "no-such-ns-canary", "--name", "task-env"}
		}, 2},
		{"publish creates", nil, nil, pub("good.json", "-o", "yaml"), 0},
		{"publish replays", nil, nil, pub("good.json", "--expected-version", "1"), 0},
		{"publish another bundle without a version", nil, nil, pub("other.json"), 3},
		{"publish a stale version", nil, nil, pub("other.json", "--expected-version", "1"), 3},
		{"publish updates, the answer lost", nil, lost, func() []string { return pub("other.json", "--expected-version", version())() }, 0},
		{"inspect present", nil, nil, func() []string {
			return []string{"env-bundle", "inspect", "-n", ns, "--name", "task-env", "-o", "json"}
		}, 0},
		{"publish over a tampered Secret", func() {
			s, err := admin.Get(ctx, "task-env", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			s.Data[envbundle.Key] = []byte(name + "=" + value)
			s.Data[name] = []byte(value)
			if _, err := admin.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}, nil, func() []string { return pub("third.json", "--expected-version", version())() }, 5},
		{"inspect a tampered Secret", nil, nil, func() []string { return []string{"env-bundle", "inspect", "-n", ns, "--name", "task-env"} }, 5},
		{"publish over a foreign Secret", func() {
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "foreign", Namespace: ns, Labels: map[string]string{"x": value}}, Data: map[string][]byte{name: []byte(value)}}
			if _, err := admin.Create(ctx, s, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}, nil, func() []string { return []string{"env-bundle", "publish", "good.json", "-n", ns, "--name", "foreign"} }, 2},
		{"inspect a foreign Secret", nil, nil, func() []string { return []string{"env-bundle", "inspect", "-n", ns, "--name", "foreign", "-o", "yaml"} }, 2},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if st.setup != nil {
				st.setup()
			}
			var env []string
			if st.env != nil {
				env = st.env()
			}
			args := st.args()
			for _, a := range append(args, env...) {
				for _, s := range secrets {
					if strings.Contains(a, s) {
						t.Fatalf("the test itself puts a secret in the arguments: %q", a)
					}
				}
			}
			stdout, stderr, code, tmp := ebClusterRun(t, dir, env, args...)
			if code != st.code {
				t.Fatalf("exit %d, want %d: %s%s", code, st.code, stdout, stderr)
			}
			if strings.Contains(st.name, "answer lost") && !strings.Contains(stdout, "updated (the answer was lost; settled by reading it back)") {
				t.Fatalf("the lost answer was not settled by reading: %s%s", stdout, stderr)
			}
			if st.code != 0 && !strings.Contains(stderr, "error: ") {
				t.Fatalf("a failure without an error message: %q", stderr)
			}
			visible := map[string]string{"stdout": stdout, "stderr": stderr}
			for _, root := range []string{dir, tmp} {
				_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
					if err != nil || d.IsDir() {
						return err
					}
					if _, input := inputs[filepath.Base(p)]; input && root == dir {
						return nil
					}
					data, _ := os.ReadFile(p)
					visible[p] = string(data)
					t.Errorf("an unexpected file %s", p)
					return nil
				})
			}
			for where, text := range visible {
				for _, s := range secrets {
					if strings.Contains(text, s) {
						t.Errorf("%s holds a secret (%q): %s", where, s, text)
					}
				}
			}
		})
	}

	// The bundle Secret's metadata: exactly publish's labels, no
	// annotations (it was tampered with through its data only).
	s, err := admin.Get(ctx, "task-env", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(s.Labels, envbundle.Labels()) || len(s.Annotations) != 0 {
		t.Fatalf("the bundle Secret's labels %v, annotations %v", s.Labels, s.Annotations)
	}
	// The audit log (Metadata level: object references, request URIs,
	// user agents, annotations) of every request in the namespace.
	data, err := os.ReadFile(cp.AuditLogPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := 0
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.Contains(line, `"namespace":"`+ns+`"`) {
			continue
		}
		lines++
		for _, sec := range secrets {
			if strings.Contains(line, sec) {
				t.Errorf("the audit log holds a secret (%q): %s", sec, line)
			}
		}
	}
	if lines < 3 {
		t.Fatalf("only %d audit events in %s: the check saw nothing", lines, ns)
	}
}
