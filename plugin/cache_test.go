package plugin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/qinglong/kubectl-ql3/ceremony/views"
	"github.com/qinglong/kubectl-ql3/internal/testcluster"
	"github.com/qinglong/kubectl-ql3/inventory"
	"github.com/qinglong/kubectl-ql3/inventory/rendercache"
)

// The render cache end to end, against the test cluster: lock fills it,
// preflight hits it, a tampered entry costs apply a render and nothing
// else (the objects applied are the locked ones), prune empties it.
func TestCLIRenderCache(t *testing.T) {
	ns := controlNamespace(t)
	dir := releaseCopy(t, "v3.0.0", ns, "")
	cacheHome, configHome := t.TempDir(), t.TempDir()
	env := []string{"XDG_CACHE_HOME=" + cacheHome, "XDG_CONFIG_HOME=" + configHome}
	cacheDir := filepath.Join(cacheHome, "kubectl-ql3", "render")
	keyPath := filepath.Join(configHome, "kubectl-ql3", "render-cache.key")
	work := t.TempDir()

	out, stderr, code := run(t, env, "cache", "dir")
	if got := strings.TrimSpace(out); code != 0 || got != cacheDir || !strings.Contains(stderr, "key: "+keyPath+"\n") || !strings.Contains(stderr, "build: ") {
		t.Fatalf("cache dir: exit %d, %q, want %q and the key's path on stderr\n%s", code, got, cacheDir, stderr)
	}
	// lock always renders, and fills the cache; the key is owner-only,
	// outside the cache directory.
	mustRun(t, env, "lock", dir, "--version", "3.0.0", "--update")
	entries, _ := filepath.Glob(filepath.Join(cacheDir, "*.json"))
	if len(entries) != 1 {
		t.Fatalf("after lock the cache holds %q, want one entry", entries)
	}
	if st, err := os.Stat(keyPath); err != nil || st.Mode().Perm() != 0o600 || st.Size() != 32 {
		t.Fatalf("render cache key: %v, want a 32-byte 0600 file", err)
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
	// diff from the cache holds the objects lean (their JSON, each decoded
	// when compared): its report is the decoded render's, object for
	// object (the 14 namespaced ones: other tests may install the
	// cluster-scoped CRD between the two runs).
	lean, stderr, code := run(t, env, "diff", dir, "-o", "json")
	decoded, _, code2 := run(t, env, "diff", dir, "-o", "json", "--no-cache")
	if code != 0 || code2 != 0 || !strings.Contains(stderr, "render: cache hit, 16 objects") {
		t.Fatalf("diff from the cache: exit %d, without it: exit %d\n%s", code, code2, stderr)
	}
	if l, d := namespacedChanges(t, lean), namespacedChanges(t, decoded); len(l) != 14 || !slices.Equal(l, d) {
		t.Fatalf("diff from the cache and without it differ in their 14 namespaced objects:\n%s\n%s", lean, decoded)
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
	out, stderr, code = run(t, env, "apply", "--preflight", filepath.Join(work, "hit.json"), "--receipts-dir", filepath.Join(work, "r"))
	if code != 0 || !strings.Contains(out, "committed") {
		t.Fatalf("apply: exit %d\n%s\n%s", code, out, stderr)
	}
	if !strings.Contains(stderr, "render: cache miss (entry not written with this installation's key), stored") {
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
	if code != 0 || !strings.Contains(stderr, "render: cache miss (entry not written with this installation's key), stored") || strings.Contains(out, "pwned") {
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

	// A key others may read is refused, and left as it is: the cache is off.
	key, _ := os.ReadFile(keyPath)
	if err := os.Chmod(keyPath, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code = run(t, env, "cache", "dir"); code != 0 || !strings.Contains(stderr, "render cache: off: render cache key: "+keyPath) || !strings.Contains(stderr, "owner-only") {
		t.Errorf("cache dir with a group-readable key: exit %d, want 0 and the cache off\n%s", code, stderr)
	}
	if after, _ := os.ReadFile(keyPath); !bytes.Equal(after, key) {
		t.Error("a refused key was replaced")
	}
}

// issue #22 item 1: a lock whose render digests were edited (its sources
// untouched) plus a planted cache entry holding the objects those digests
// name. Whoever planted it does not hold this installation's key, so the
// entry is never used: preflight, apply (of a preflight of the genuine lock)
// and diff refuse exactly as they do without the cache, and the planted
// object never reaches the API server.
func TestCLIRenderCachePlantedEntry(t *testing.T) {
	ns := controlNamespace(t)
	dir := releaseCopy(t, "v3.0.0", ns, "")
	cacheHome := t.TempDir()
	env := []string{"XDG_CACHE_HOME=" + cacheHome, "XDG_CONFIG_HOME=" + t.TempDir()}
	mustRun(t, env, "lock", dir, "--version", "3.0.0", "--update")
	entries, _ := filepath.Glob(filepath.Join(cacheHome, "kubectl-ql3", "render", "*.json"))
	if len(entries) != 1 {
		t.Fatalf("after lock the cache holds %q, want one entry", entries)
	}
	victim, err := inventory.ReadLock(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatal(err)
	}
	// A preflight of the genuine lock, for apply below.
	work := t.TempDir()
	genuine := filepath.Join(work, "genuine.json")
	mustRun(t, env, "preflight", dir, "--transition", "install", "--expected-head", headToken(t, env, ns), "--out", genuine)

	// Another installation (another branch's CI) renders the release with
	// one more object, ql3-planted, and caches it under its own key.
	other := t.TempDir()
	otherEnv := []string{"XDG_CACHE_HOME=" + filepath.Join(other, "cache"), "XDG_CONFIG_HOME=" + filepath.Join(other, "config")}
	odir := filepath.Join(other, "release")
	if err := os.CopyFS(odir, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(odir, "planted.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ql3-planted\ndata:\n  owner: attacker\n")
	kust, _ := os.ReadFile(filepath.Join(odir, "kustomization.yaml"))
	write(t, filepath.Join(odir, "kustomization.yaml"), strings.Replace(string(kust), "- widget.yaml", "- widget.yaml\n- planted.yaml", 1))
	mustRun(t, otherEnv, "lock", odir, "--version", "3.0.0", "--update")
	forged, err := inventory.ReadLock(filesys.MakeFsOnDisk(), odir)
	if err != nil {
		t.Fatal(err)
	}
	if forged.Render.Digest == victim.Render.Digest || forged.Render.InventoryDigest == victim.Render.InventoryDigest {
		t.Fatal("the planted release renders like the locked one")
	}

	// The victim's lock with the other render's digests; its sources as they were.
	forged.Source = victim.Source
	data, err := forged.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, inventory.LockFile), string(data))

	// What a refusal looks like without the cache: the reference.
	preflight := func(extra ...string) (string, int) {
		t.Helper()
		args := append([]string{"preflight", dir, "--transition", "install", "--expected-head", headToken(t, env, ns), "--out", filepath.Join(work, "p.json")}, extra...)
		_, stderr, code := run(t, env, args...)
		return stderr, code
	}
	refusal := func(stderr string) string { return stderr[max(strings.LastIndex(stderr, "error: "), 0):] }
	wantStderr, wantCode := preflight("--no-cache")
	if wantCode == 0 || !strings.Contains(wantStderr, "render.digest") {
		t.Fatalf("preflight --no-cache with the edited lock: exit %d, want a refusal naming render.digest\n%s", wantCode, wantStderr)
	}
	_, diffWant, diffCode := run(t, env, "diff", dir, "--no-cache")
	apply := []string{"apply", "--preflight", genuine, "--receipts-dir", filepath.Join(work, "r")}
	_, applyWant, applyCode := run(t, env, append(apply, "--no-cache")...)
	if applyCode == 0 || diffCode == 0 {
		t.Fatalf("apply, diff --no-cache with the edited lock: exit %d, %d; want refusals\n%s\n%s", applyCode, diffCode, applyWant, diffWant)
	}

	otherEntry := otherCacheEntry(t, other)
	key := "sha256:" + strings.TrimSuffix(filepath.Base(entries[0]), ".json")
	plants := map[string][]byte{
		// The bare entry today's format accepts, fields retargeted.
		"bare entry": plantedEntry(t, otherEntry, key, victim.Source.Digest),
		// The other installation's MAC, recomputed over the retargeted entry
		// with its own key: valid, but not under this installation's key.
		"entry with another installation's mac": func() []byte {
			e := plantedEntry(t, otherEntry, key, victim.Source.Digest)
			k, err := os.ReadFile(filepath.Join(other, "config", "kubectl-ql3", "render-cache.key"))
			if err != nil {
				t.Fatal(err)
			}
			out, _ := json.Marshal(map[string]any{"entry": json.RawMessage(e), "mac": rendercache.MAC(k, e)})
			return out
		}(),
	}
	for name, plant := range plants {
		if err := os.WriteFile(entries[0], plant, 0o600); err != nil {
			t.Fatal(err)
		}
		stderr, code := preflight()
		if code != wantCode || refusal(stderr) != refusal(wantStderr) {
			t.Errorf("%s: preflight exit %d, want %d and the refusal without the cache (%q)\n%s", name, code, wantCode, refusal(wantStderr), stderr)
		}
		if err := os.WriteFile(entries[0], plant, 0o600); err != nil {
			t.Fatal(err)
		}
		out, stderr, code := run(t, env, "diff", dir, "--exit-code")
		if code != diffCode || refusal(stderr) != refusal(diffWant) || strings.Contains(out, "ql3-planted") {
			t.Errorf("%s: diff exit %d, want %d and the refusal without the cache (%q)\n%s\n%s", name, code, diffCode, refusal(diffWant), out, stderr)
		}
		if err := os.WriteFile(entries[0], plant, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, stderr, code := run(t, env, apply...); code != applyCode || refusal(stderr) != refusal(applyWant) {
			t.Errorf("%s: apply exit %d, want %d and the refusal without the cache (%q)\n%s", name, code, applyCode, refusal(applyWant), stderr)
		}
	}
	// The audit log: no request of any kind named the planted object.
	evs, err := cp.Events(func(e testcluster.AuditEvent) bool { return e.ObjectRef.Name == "ql3-planted" })
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 0 {
		t.Errorf("the API server saw %d request(s) for the planted object, first: %s %s", len(evs), evs[0].Verb, evs[0].RequestURI)
	}
}

// otherCacheEntry is the entry bytes of the one entry in another
// installation's cache: its entry member.
func otherCacheEntry(t *testing.T, other string) []byte {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(other, "cache", "kubectl-ql3", "render", "*.json"))
	if len(files) != 1 {
		t.Fatalf("the other cache holds %q, want one entry", files)
	}
	data, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Entry json.RawMessage `json:"entry"`
	}
	if err := json.Unmarshal(data, &f); err != nil || f.Entry == nil {
		t.Fatalf("the other cache's entry file: %v", err)
	}
	return f.Entry
}

// plantedEntry is entry retargeted to key and sourceDigest, in the schema
// the bare entry format had ("kubectl-ql3/render-cache@v1").
func plantedEntry(t *testing.T, entry []byte, key, sourceDigest string) []byte {
	t.Helper()
	var e map[string]json.RawMessage
	if err := json.Unmarshal(entry, &e); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"key": key, "sourceDigest": sourceDigest, "schema": "kubectl-ql3/render-cache@v1"} {
		e[k], _ = json.Marshal(v)
	}
	out, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// namespacedChanges are the namespaced objects of a `diff -o json` report,
// each as its JSON.
func namespacedChanges(t *testing.T, report string) []string {
	t.Helper()
	var rep views.DiffReport
	if err := json.Unmarshal([]byte(report), &rep); err != nil {
		t.Fatalf("diff -o json: %v\n%s", err, report)
	}
	var out []string
	for _, o := range rep.Objects {
		if o.Object.Namespace != "" {
			data, _ := json.Marshal(o)
			out = append(out, string(data))
		}
	}
	return out
}
