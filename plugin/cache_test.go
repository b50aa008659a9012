package plugin_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The render cache end to end, against the test cluster: lock fills it,
// preflight hits it, a tampered entry costs apply a render and nothing
// else (the objects applied are the locked ones), prune empties it.
func TestCLIRenderCache(t *testing.T) {
	ns := controlNamespace(t)
	dir := releaseCopy(t, "v3.0.0", ns, "")
	cacheHome := t.TempDir()
	env := []string{"XDG_CACHE_HOME=" + cacheHome}
	cacheDir := filepath.Join(cacheHome, "kubectl-ql3", "render")
	work := t.TempDir()

	if got := strings.TrimSpace(mustRun(t, env, "cache", "dir")); got != cacheDir {
		t.Fatalf("cache dir %q, want %q", got, cacheDir)
	}
	// lock always renders, and fills the cache.
	mustRun(t, env, "lock", dir, "--version", "3.0.0", "--update")
	entries, _ := filepath.Glob(filepath.Join(cacheDir, "*.json"))
	if len(entries) != 1 {
		t.Fatalf("after lock the cache holds %q, want one entry", entries)
	}

	preflight := func(name string, extra ...string) string {
		t.Helper()
		args := append([]string{"preflight", dir, "--transition", "install", "--expected-head", headToken(t, env, ns), "--out", filepath.Join(work, name+".json")}, extra...)
		_, stderr, code := run(t, env, args...)
		if code != 0 {
			t.Fatalf("preflight %s: exit %d\n%s", name, code, stderr)
		}
		return stderr
	}
	if stderr := preflight("hit"); !strings.Contains(stderr, "render: cache hit, 16 objects") {
		t.Fatalf("preflight after lock: want a cache hit\n%s", stderr)
	}
	if stderr := preflight("nocache", "--no-cache"); strings.Contains(stderr, "render:") {
		t.Fatalf("preflight --no-cache: want no render cache line\n%s", stderr)
	}

	// Tamper the entry: a value the lock binds, every claimed digest kept.
	data, err := os.ReadFile(entries[0])
	if err != nil {
		t.Fatal(err)
	}
	tampered := bytes.Replace(data, []byte(`"log-level":"info"`), []byte(`"log-level":"pwned"`), 1)
	if bytes.Equal(tampered, data) {
		t.Fatal("the entry holds no log-level to tamper with")
	}
	if err := os.WriteFile(entries[0], tampered, 0o600); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := run(t, env, "apply", "--preflight", filepath.Join(work, "hit.json"), "--receipts-dir", filepath.Join(work, "r"))
	if code != 0 || !strings.Contains(out, "committed") {
		t.Fatalf("apply: exit %d\n%s\n%s", code, out, stderr)
	}
	if !strings.Contains(stderr, "render: cache miss (entry does not match the lock), stored") {
		t.Errorf("apply with a tampered entry: want a miss and a re-render\n%s", stderr)
	}
	cm, err := cp.Clientset().CoreV1().ConfigMaps(ns).Get(context.Background(), "ql3-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := cm.Data["log-level"]; got != "info" {
		t.Errorf("applied log-level %q, want the locked %q", got, "info")
	}

	// diff takes the render from the same cache: a hit after apply stored
	// a good entry, and a tampered entry costs a render, never a diff
	// against the tampered objects.
	out, stderr, code = run(t, env, "diff", dir, "--exit-code")
	if code != 0 || !strings.Contains(stderr, "render: cache hit, 16 objects") {
		t.Errorf("diff after apply: exit %d, want 0 and a cache hit\n%s\n%s", code, out, stderr)
	}
	if err := os.WriteFile(entries[0], tampered, 0o600); err != nil {
		t.Fatal(err)
	}
	out, stderr, code = run(t, env, "diff", dir, "--exit-code")
	if code != 0 || !strings.Contains(stderr, "render: cache miss (entry does not match the lock), stored") || strings.Contains(out, "pwned") {
		t.Errorf("diff with a tampered entry: exit %d, want 0, a miss and no tampered value\n%s\n%s", code, out, stderr)
	}
	if _, stderr, _ = run(t, env, "diff", dir, "--no-cache"); strings.Contains(stderr, "render:") {
		t.Errorf("diff --no-cache: want no render cache line\n%s", stderr)
	}

	_, stderr, code = run(t, env, "cache", "prune")
	if code != 0 || !strings.Contains(stderr, "removed 1 render cache entry") {
		t.Errorf("prune: exit %d: %s", code, stderr)
	}
	if left, _ := filepath.Glob(filepath.Join(cacheDir, "*")); len(left) != 0 {
		t.Errorf("after prune the cache holds %q", left)
	}
	if _, stderr, code = run(t, env, "cache", "prune", "--older-than", "-1h"); code != 2 {
		t.Errorf("prune --older-than -1h: exit %d, want 2: %s", code, stderr)
	}
}
