package plugin_test

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/qinglong/kubectl-ql3/inventory"
	"github.com/qinglong/kubectl-ql3/plugin"
)

// fixedIdentity is the cluster identity the golden locks are written for.
var fixedIdentity = inventory.ClusterIdentity("00000000-0000-4000-8000-000000000000")

// copyRelease copies a fixture release into a fresh directory and returns it.
func copyRelease(t *testing.T, name string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), name)
	if err := os.CopyFS(dst, os.DirFS(fixtureDir(name))); err != nil {
		t.Fatal(err)
	}
	return dst
}

func edit(t *testing.T, path, old, new string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), old) {
		t.Fatalf("%s has no %q", path, old)
	}
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(string(data), old, new)), 0o644); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// noLockWritten fails if dir holds a lock, or a temporary file of one.
func noLockWritten(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.Contains(e.Name(), inventory.LockFile) {
			t.Errorf("%s was written", filepath.Join(dir, e.Name()))
		}
	}
}

func TestLockGolden(t *testing.T) {
	for _, f := range fixtures {
		t.Run(f, func(t *testing.T) {
			dir := copyRelease(t, f)
			version := strings.TrimPrefix(f, "v")
			out, stderr := runOK(t, "lock", dir, "--version", version, "--cluster-identity", fixedIdentity)
			golden(t, f+"/ql3.lock.yaml", out)
			lockPath := filepath.Join(dir, inventory.LockFile)
			if got := read(t, lockPath); got != out {
				t.Errorf("the file differs from what was printed:\n%s", got)
			}
			if !strings.HasPrefix(stderr, "wrote "+lockPath+": release "+version) {
				t.Errorf("stderr %q", stderr)
			}
			out, _ = runOK(t, "lock", "verify", dir)
			if !strings.HasPrefix(out, dir+" matches its lock: release "+version) {
				t.Errorf("verify stdout %q", out)
			}

			// Locking again is a no-op; a different lock is refused without --update.
			_, stderr = runOK(t, "lock", dir, "--version", version, "--cluster-identity", fixedIdentity)
			if !strings.HasPrefix(stderr, "unchanged ") {
				t.Errorf("relock stderr %q", stderr)
			}
			before := read(t, lockPath)
			_, stderr, code := run(t, nil, "lock", dir, "--version", "9.9.9", "--cluster-identity", fixedIdentity)
			if code != 2 || !strings.Contains(stderr, "exists and differs from the new lock; pass --update") {
				t.Errorf("exit %d, stderr %q", code, stderr)
			}
			if read(t, lockPath) != before {
				t.Error("the lock was replaced without --update")
			}
			runOK(t, "lock", dir, "--version", "9.9.9", "--cluster-identity", fixedIdentity, "--update")
			if !strings.Contains(read(t, lockPath), "version: 9.9.9") {
				t.Error("--update did not replace the lock")
			}
			noTempFiles(t, dir)
		})
	}
}

func noTempFiles(t *testing.T, dir string) {
	t.Helper()
	matches, _ := filepath.Glob(filepath.Join(dir, "."+inventory.LockFile+".*"))
	if len(matches) > 0 {
		t.Errorf("temporary files left: %v", matches)
	}
}

// TestLockOnline reads the cluster identity and the RESTMapper from the
// current context. The Widget kind is not served yet: its CRD in the
// release decides its scope.
func TestLockOnline(t *testing.T) {
	dir := copyRelease(t, "v3.0.0")
	out, _ := runOK(t, "lock", dir, "--version", "3.0.0")
	l, err := inventory.ParseLock([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if l.Target.ClusterIdentity != kubeSystemIdentity(t) || l.Target.Namespace != "ql3-demo" {
		t.Errorf("target %+v", l.Target)
	}
	if l.Tool.Constraint != ">=0.1.0-0 <1.0.0-0" {
		t.Errorf("constraint %q", l.Tool.Constraint)
	}
	runOK(t, "lock", "verify", dir)
	runOK(t, "lock", "verify", dir, "--context", "ql3-admin")
}

func TestLockBadInput(t *testing.T) {
	tests := []struct {
		name   string
		setup  func(t *testing.T, dir string) string // returns the release dir to lock
		args   []string
		stderr []string
	}{
		{"missing kustomization", func(t *testing.T, dir string) string {
			os.Remove(filepath.Join(dir, "kustomization.yaml"))
			return dir
		}, nil, []string{"has no kustomization"}},
		{"invalid yaml", func(t *testing.T, dir string) string {
			write(t, filepath.Join(dir, "widget.yaml"), "apiVersion: demo.qinglong.io/v1\nkind: [Widget\n")
			return dir
		}, nil, []string{"widget.yaml", "MalformedYAMLError"}},
		{"unknown kustomization field", func(t *testing.T, dir string) string {
			edit(t, filepath.Join(dir, "kustomization.yaml"), "resources:", "resourcez: []\nresources:")
			return dir
		}, nil, []string{`unknown field "resourcez"`}},
		{"tag-only image", func(t *testing.T, dir string) string {
			edit(t, filepath.Join(dir, "worker.yaml"), "pause:3.10@sha256:ee6521f290b2168b6e0935a181d4cff9be1ac3f505666ef0e3c98fae8199917a", "pause:3.10")
			return dir
		}, nil, []string{`object "apps/v1/Deployment/ql3-demo/ql3-worker": container "worker": image "registry.k8s.io/pause:3.10" is not pinned by digest`, `(in ["worker.yaml"])`}},
		{"duplicate identity", func(t *testing.T, dir string) string {
			write(t, filepath.Join(dir, "hpa.yaml"), "apiVersion: autoscaling/v1\nkind: HorizontalPodAutoscaler\nmetadata:\n  name: ql3-worker\nspec:\n  maxReplicas: 2\n  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: ql3-worker}\n---\napiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata:\n  name: ql3-worker\nspec:\n  maxReplicas: 2\n  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: ql3-worker}\n")
			edit(t, filepath.Join(dir, "kustomization.yaml"), "- widget.yaml\n", "- widget.yaml\n- hpa.yaml\n")
			return dir
		}, nil, []string{`objects "autoscaling/v1/HorizontalPodAutoscaler/ql3-demo/ql3-worker" and "autoscaling/v2/HorizontalPodAutoscaler/ql3-demo/ql3-worker" are the same object`}},
		{"head configmap", func(t *testing.T, dir string) string {
			write(t, filepath.Join(dir, "head.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: qinglong3-deployment-head\ndata: {head.json: '{}'}\n")
			edit(t, filepath.Join(dir, "kustomization.yaml"), "- widget.yaml\n", "- widget.yaml\n- head.yaml\n")
			return dir
		}, nil, []string{`object "v1/ConfigMap/ql3-demo/qinglong3-deployment-head" (in ["head.yaml"]): the name "qinglong3-deployment-head" is reserved for the Head, in every namespace`}},
		{"missing role", func(t *testing.T, dir string) string {
			edit(t, filepath.Join(dir, "control-ai.yaml"), "qinglong.io/role: control-ai", "qinglong.io/role: worker")
			return dir
		}, nil, []string{`no workload is labelled qinglong.io/role=<role> for roles ["control-ai"]`}},
		{"role outside the surface", func(t *testing.T, dir string) string {
			edit(t, filepath.Join(dir, "worker.yaml"), "qinglong.io/role: worker\nspec:", "qinglong.io/role: scheduler\nspec:")
			return dir
		}, nil, []string{`"apps/v1/Deployment/ql3-demo/ql3-worker (qinglong.io/role=scheduler)"`}},
		{"two control namespaces", func(t *testing.T, dir string) string {
			extra := filepath.Join(filepath.Dir(dir), "extra")
			write(t, filepath.Join(extra, "kustomization.yaml"), "namespace: ql3-other\nresources: [control.yaml]\n")
			write(t, filepath.Join(extra, "control.yaml"), strings.Replace(read(t, filepath.Join(dir, "control.yaml")), "name: ql3-control\n", "name: ql3-control-2\n", 1))
			rel := filepath.Join(filepath.Dir(dir), "rel")
			write(t, filepath.Join(rel, "kustomization.yaml"), "resources:\n- ../"+filepath.Base(dir)+"\n- ../extra\n")
			return rel
		}, nil, []string{`control workloads are in namespaces "ql3-demo" and "ql3-other"; the control namespace must be unique`}},
		{"secret data", func(t *testing.T, dir string) string {
			edit(t, filepath.Join(dir, "kustomization.yaml"), "resources:", "secretGenerator:\n- name: api\n  literals: [token=s3cr3t-value]\nresources:")
			return dir
		}, nil, []string{`Secret "v1/Secret/ql3-demo/api-`, "--allow-secret-data"}},
		{"remote base", func(t *testing.T, dir string) string {
			edit(t, filepath.Join(dir, "kustomization.yaml"), "- widget.yaml\n", "- widget.yaml\n- https://github.com/example/deploy//base?ref=v1\n")
			return dir
		}, nil, []string{`resources entry "https://github.com/example/deploy//base?ref=v1" is remote`}},
		{"version with v", func(t *testing.T, dir string) string { return dir },
			[]string{"--version", "v3.0.0"}, []string{`--version "v3.0.0" is not strict SemVer 2.0.0`}},
		{"version missing", func(t *testing.T, dir string) string { return dir },
			[]string{}, []string{"--version is required"}},
		{"bad cluster identity", func(t *testing.T, dir string) string { return dir },
			[]string{"--version", "3.0.0", "--cluster-identity", "prod"}, []string{`--cluster-identity "prod" is not a digest`}},
		{"short key", func(t *testing.T, dir string) string {
			write(t, filepath.Join(filepath.Dir(dir), "key"), "short")
			return dir
		}, []string{"--version", "3.0.0", "--cluster-identity", fixedIdentity, "--allow-secret-data", "--secret-digest-key-file", "KEY"}, []string{"--secret-digest-key-file"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := copyRelease(t, "v3.0.0")
			rel := tt.setup(t, dir)
			args := tt.args
			if args == nil {
				args = []string{"--version", "3.0.0", "--cluster-identity", fixedIdentity}
			}
			for i, a := range args {
				if a == "KEY" {
					args[i] = filepath.Join(filepath.Dir(dir), "key")
				}
			}
			out, stderr, code := run(t, nil, append([]string{"lock", rel}, args...)...)
			if code != 2 || out != "" {
				t.Fatalf("exit %d, want 2 (invalid); stdout %q; stderr %q", code, out, stderr)
			}
			if !strings.HasPrefix(stderr, "error: ") || strings.Count(stderr, "error:") != 1 {
				t.Errorf("stderr is not one error: %q", stderr)
			}
			for _, w := range tt.stderr {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr does not mention %q:\n%s", w, stderr)
				}
			}
			if strings.Contains(stderr, "s3cr3t-value") {
				t.Error("stderr shows a Secret value")
			}
			noLockWritten(t, rel)
		})
	}
}

func TestLockVerifyBadInput(t *testing.T) {
	tests := []struct {
		name   string
		edit   func(t *testing.T, dir string)
		stderr []string
	}{
		{"no lock", func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, inventory.LockFile)) },
			[]string{"has no ql3.lock.yaml; write one with kubectl ql3 lock"}},
		{"unknown lock field", func(t *testing.T, dir string) {
			edit(t, filepath.Join(dir, inventory.LockFile), "  fieldManager: kubectl-ql3\n", "  fieldManager: kubectl-ql3\n  force: true\n")
		}, []string{inventory.LockFile + ": invalid lock: tool.force: unknown field"}},
		{"wrong type", func(t *testing.T, dir string) {
			edit(t, filepath.Join(dir, inventory.LockFile), "count: 16", "count: '16'")
		}, []string{"render.count: want an integer, got a string"}},
		{"non-semver version", func(t *testing.T, dir string) {
			edit(t, filepath.Join(dir, inventory.LockFile), "version: 3.0.0", "version: v3")
		}, []string{`release.version: "v3" is not strict SemVer 2.0.0`}},
		{"tree changed", func(t *testing.T, dir string) {
			edit(t, filepath.Join(dir, "config.yaml"), "log-level: info", "log-level: debug")
			write(t, filepath.Join(dir, "extra.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\n")
			edit(t, filepath.Join(dir, "kustomization.yaml"), "- widget.yaml\n", "- widget.yaml\n- extra.yaml\n")
		}, []string{
			`release "` + "DIR" + `" does not match its lock:`,
			`source.files["config.yaml"]: changed`,
			`source.files["extra.yaml"]: read by the kustomization but not in the lock`,
			`source.files["kustomization.yaml"]: changed`,
			"source.digest: lock sha256:",
			`render.inventory: "v1/ConfigMap/ql3-demo/extra" is in the release but not in the lock`,
			"render.count: lock 16, release 17",
			"render.inventoryDigest: lock sha256:",
			"render.digest: lock sha256:",
		}},
		{"tool constraint", func(t *testing.T, dir string) {
			edit(t, filepath.Join(dir, inventory.LockFile), "'>=0.1.0-0 <1.0.0-0'", "'>=0.2.0-0 <1.0.0-0'")
		}, []string{`kubectl-ql3 v0.1.0-test does not satisfy the lock's tool.constraint ">=0.2.0-0 <1.0.0-0"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := copyRelease(t, "v3.0.0")
			runOK(t, "lock", dir, "--version", "3.0.0", "--cluster-identity", fixedIdentity)
			tt.edit(t, dir)
			out, stderr, code := run(t, nil, "lock", "verify", dir)
			if code != 2 || out != "" {
				t.Fatalf("exit %d, want 2 (invalid); stdout %q; stderr %q", code, out, stderr)
			}
			for _, w := range tt.stderr {
				if w = strings.ReplaceAll(w, "DIR", dir); !strings.Contains(stderr, w) {
					t.Errorf("stderr does not mention %q:\n%s", w, stderr)
				}
			}
		})
	}
}

// TestLockSecrets: with --allow-secret-data, nothing printed or written shows
// a Secret value; a keyed lock verifies only with its key.
func TestLockSecrets(t *testing.T) {
	const value = "pa55-w0rd"
	dir := copyRelease(t, "v3.0.0")
	write(t, filepath.Join(dir, "db.env"), "DB_PASSWORD="+value+"\n")
	edit(t, filepath.Join(dir, "kustomization.yaml"), "resources:", "secretGenerator:\n- name: db\n  envs: [db.env]\nresources:")
	key := filepath.Join(t.TempDir(), "key")
	write(t, key, "0123456789abcdef0123456789abcdef")
	if err := os.Chmod(key, 0o600); err != nil { // a key file must be owner-only
		t.Fatal(err)
	}
	leaks := []string{value, base64.StdEncoding.EncodeToString([]byte(value))}

	check := func(what, s string) {
		t.Helper()
		for _, l := range leaks {
			if strings.Contains(s, l) {
				t.Errorf("%s shows the Secret value (%q)", what, l)
			}
		}
	}
	base := []string{"lock", dir, "--version", "3.0.0", "--cluster-identity", fixedIdentity, "--allow-secret-data", "--update"}
	out, stderr := runOK(t, append(base, "--secret-digest-key-file", key)...)
	check("lock", out+stderr+read(t, filepath.Join(dir, inventory.LockFile)))
	if !strings.Contains(out, "secretValuesCovered: true") || !strings.Contains(out, "{path: db.env, digest: 'hmac-sha256:") {
		t.Errorf("keyed lock:\n%s", out)
	}
	for _, args := range [][]string{{"-o", "yaml"}, {"-o", "json"}, {"--inventory"}} {
		out, stderr := runOK(t, append([]string{"render", dir, "--allow-secret-data", "--secret-digest-key-file", key}, args...)...)
		check("render "+strings.Join(args, " "), out+stderr)
	}
	runOK(t, "lock", "verify", dir, "--allow-secret-data", "--secret-digest-key-file", key)
	_, stderr, code := run(t, nil, "lock", "verify", dir, "--allow-secret-data")
	if code != 2 || !strings.Contains(stderr, "render.secretValuesCovered: lock true, release false; the lock binds Secret values under a key: pass --secret-digest-key-file") {
		t.Errorf("verify without the key: exit %d\n%s", code, stderr)
	}
	_, stderr, code = run(t, nil, "lock", "verify", dir)
	if code != 2 || !strings.Contains(stderr, "--allow-secret-data") {
		t.Errorf("verify without --allow-secret-data: exit %d\n%s", code, stderr)
	}

	// Without a key the values are redacted, and the lock says they are not bound.
	out, stderr = runOK(t, base...)
	check("redacted lock", out+stderr)
	if !strings.Contains(out, "secretValuesCovered: false") || !strings.Contains(out, "{path: db.env, digest: <redacted>}") {
		t.Errorf("redacted lock:\n%s", out)
	}
	out, _ = runOK(t, "lock", "verify", dir, "--allow-secret-data")
	if !strings.Contains(out, "(Secret values redacted, not bound)") {
		t.Errorf("verify stdout %q", out)
	}
}

// lock and lock verify print a LockReport with -o: the template formats
// see its fields, -o name the lock file's path.
func TestLockOutput(t *testing.T) {
	dir := copyRelease(t, "v3.0.0")
	lockPath := filepath.Join(dir, inventory.LockFile)
	if err := os.Remove(lockPath); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	out, stderr := runOK(t, "lock", dir, "--version", "3.0.0", "--cluster-identity", fixedIdentity, "-o", "name")
	if out != lockPath+"\n" || !strings.HasPrefix(stderr, "wrote "+lockPath) {
		t.Fatalf("lock -o name: stdout %q, stderr %q; want the lock path, and wrote on stderr", out, stderr)
	}
	digest := regexp.MustCompile(`lock (sha256:[0-9a-f]{64})\n$`).FindStringSubmatch(stderr)
	if digest == nil {
		t.Fatalf("no lock digest in %q", stderr)
	}
	if out, _ := runOK(t, "lock", dir, "--version", "3.0.0", "--cluster-identity", fixedIdentity, "-o", "jsonpath={.state} {.digest}"); out != "unchanged "+digest[1] {
		t.Errorf("relock -o jsonpath = %q, want %q", out, "unchanged "+digest[1])
	}
	if out, _ := runOK(t, "lock", "verify", dir, "-o", "go-template={{.digest}}"); out != digest[1] {
		t.Errorf("lock verify -o go-template={{.digest}} = %q, want %q", out, digest[1])
	}
	out, _ = runOK(t, "lock", "verify", dir, "-o", "json")
	var rep plugin.LockReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Path != lockPath || rep.State != "verified" || rep.Digest != digest[1] || rep.Lock == nil || rep.Lock.Release.Version != "3.0.0" || rep.Lock.Target.ClusterIdentity != fixedIdentity {
		t.Errorf("lock verify -o json = %+v", rep)
	}
	if out, _ := runOK(t, "lock", "verify", dir, "-o", "name"); out != lockPath+"\n" {
		t.Errorf("lock verify -o name = %q", out)
	}
	// A bad -o is refused before anything is written.
	other := copyRelease(t, "v3.1.0")
	_ = os.Remove(filepath.Join(other, inventory.LockFile))
	if _, stderr, code := run(t, nil, "lock", other, "--version", "3.1.0", "--cluster-identity", fixedIdentity, "-o", "wide"); code != 2 || !strings.Contains(stderr, `--output "wide" is not supported`) {
		t.Errorf("lock -o wide: exit %d, stderr %q", code, stderr)
	}
	noLockWritten(t, other)
}
