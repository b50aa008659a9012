package plugin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qinglong/kubectl-ql3/ceremony/package/intent"
	"github.com/qinglong/kubectl-ql3/ceremony/package/pointer"
	"github.com/qinglong/kubectl-ql3/ceremony/package/stagelayout/stagelayouttest"
	"github.com/qinglong/kubectl-ql3/internal/faults"
	"github.com/qinglong/kubectl-ql3/internal/testcluster"
)

const pkgRepo = "registry.example.com/qinglong/packages/demo"

// pkgStage stages a lock of version in its own layout under dir and
// returns the stage, the lock file and the trusted key file.
func pkgStage(t *testing.T, dir, version string) (*stagelayouttest.Stage, string, string) {
	t.Helper()
	lock := []byte(`{"package":"weather-tools","version":"` + version + `"}`)
	s, err := stagelayouttest.Write(filepath.Join(dir, "layout-"+version), stagelayouttest.Spec{Lock: lock})
	if err != nil {
		t.Fatal(err)
	}
	lf, kf := filepath.Join(dir, "lock-"+version+".json"), filepath.Join(dir, "stage.pem")
	for path, b := range map[string][]byte{lf: lock, kf: stagelayouttest.PublicKeyPEM(stagelayouttest.Key(1))} {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return s, lf, kf
}

// pkgIntentFile writes s's intent for ns on the test cluster as
// generation gen after prev ("" for none).
func pkgIntentFile(t *testing.T, dir string, s *stagelayouttest.Stage, ns string, gen int64, prev string) (string, intent.Intent) {
	t.Helper()
	in := s.Intent()
	in.ClusterIdentity, in.Namespace, in.Generation = kubeSystemIdentity(t), ns, gen
	if prev != "" {
		in.PreviousLockDigest = &prev
	}
	data, _ := json.MarshalIndent(in, "", "  ")
	f := filepath.Join(dir, fmt.Sprintf("intent-%d-%s.json", gen, in.LockDigest[7:15]))
	if err := os.WriteFile(f, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return f, in
}

func stageArgs(s *stagelayouttest.Stage, key string) []string {
	return []string{"--layout", s.Dir, "--trusted-key", key, "--allow-ref", pkgRepo}
}

// pointerWrites are the audited writes of ConfigMaps in ns.
func pointerWrites(t *testing.T, ns string) []string {
	t.Helper()
	evs, err := cp.Writes(func(e testcluster.AuditEvent) bool {
		return e.ObjectRef.Namespace == ns && e.ObjectRef.Resource == "configmaps" && !strings.HasPrefix(e.User.Username, "system:")
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		out = append(out, e.Verb)
	}
	return out
}

// intent → inspect → activate → replay → next intent → upgrade, a stale
// writer refused, inspect of every state, through the built binary and a
// recording proxy: no patch, list or watch; the audit log holds one
// create and one update.
func TestPackagePointerCLI(t *testing.T) {
	ns := cp.Namespace(t)
	dir := t.TempDir()
	log := &faults.Recorder{}
	env := proxied(t, ns, log.Wrap)
	s1, lock1, key := pkgStage(t, dir, "1.2.2")
	s2, lock2, _ := pkgStage(t, dir, "1.2.3")
	s3, _, _ := pkgStage(t, dir, "1.2.4")
	intentArgs := func(s *stagelayouttest.Stage, lock string) []string {
		return append([]string{"package", "intent", "--lock", lock, "--project", "demo", "--package", "weather-tools", "-n", ns}, stageArgs(s, key)...)
	}
	out, stderr, code := run(t, env, intentArgs(s1, lock1)...)
	if code != 0 || !strings.Contains(stderr, "generation 1") {
		t.Fatalf("intent: exit %d: %s", code, stderr)
	}
	i1 := filepath.Join(dir, "i1.json")
	os.WriteFile(i1, []byte(out), 0o644)
	in1, err := intent.Parse([]byte(out))
	if err != nil || in1.Generation != 1 || in1.PreviousLockDigest != nil || in1.Evidence() != s1.Evidence {
		t.Fatalf("intent 1: %+v %v", in1, err)
	}
	ptr := func(verb, file string, extra ...string) []string {
		return append(append([]string{"package", verb, "--intent", file}, stageArgs(s1, key)...), extra...)
	}
	if out := mustRun(t, env, ptr("inspect", i1)...); !strings.Contains(out, ": not-activated") {
		t.Fatalf("inspect before: %s", out)
	}
	out = mustRun(t, env, ptr("activate", i1, "-o", "json")...)
	var res pointer.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Action != pointer.Created || res.Active == nil || !pointer.Same(res.Active.Intent, in1) {
		t.Fatalf("activate -o json: %v\n%s", err, out)
	}
	if out := mustRun(t, env, ptr("activate", i1)...); !strings.Contains(out, ": replayed, version "+res.Pointer.ResourceVersion) {
		t.Fatalf("replay: %s", out)
	}
	if out := mustRun(t, env, ptr("inspect", i1, "-o", "jsonpath={.state} {.active.receipt.intentDigest}")...); out != "active "+res.IntentDigest {
		t.Fatalf("inspect -o jsonpath: %q", out)
	}
	// The next intent is built from the pointer: generation 2 after lock 1.
	out = mustRun(t, env, intentArgs(s2, lock2)...)
	i2 := filepath.Join(dir, "i2.json")
	os.WriteFile(i2, []byte(out), 0o644)
	in2, err := intent.Parse([]byte(out))
	if err != nil || in2.Generation != 2 || *in2.PreviousLockDigest != s1.Evidence.LockDigest || in2.Evidence() != s2.Evidence {
		t.Fatalf("intent 2: %+v %v", in2, err)
	}
	// Building again for the active stage gives the active intent itself.
	if out := mustRun(t, env, intentArgs(s1, lock1)...); !bytes.Contains([]byte(out), []byte(`"generation": 1`)) {
		t.Fatalf("intent of the active stage: %s", out)
	}
	i3, _ := pkgIntentFile(t, dir, s3, ns, 2, s1.Evidence.LockDigest) // a competitor of i2
	up := func(file string, s *stagelayouttest.Stage) []string {
		return append([]string{"package", "activate", "--intent", file}, stageArgs(s, key)...)
	}
	if out := mustRun(t, env, up(i2, s2)...); !strings.Contains(out, ": updated, version ") {
		t.Fatalf("upgrade: %s", out)
	}
	if _, stderr, code := run(t, env, up(i3, s3)...); code != 3 || !strings.Contains(stderr, "nothing was written") {
		t.Fatalf("stale writer: exit %d: %s", code, stderr)
	}
	if out, _, code := run(t, env, append([]string{"package", "inspect", "--intent", i3}, stageArgs(s3, key)...)...); code != 3 || !strings.Contains(out, ": conflict") {
		t.Fatalf("inspect of the stale intent: exit %d: %s", code, out)
	}
	// Evidence drift before any write: generation 3's stage no longer
	// proven by the trusted key (re-signed by another): exit 3, no write.
	s4, _, _ := pkgStage(t, dir, "1.2.5")
	i4, _ := pkgIntentFile(t, dir, s4, ns, 3, s2.Evidence.LockDigest)
	otherKey := filepath.Join(dir, "other.pem")
	os.WriteFile(otherKey, stagelayouttest.PublicKeyPEM(stagelayouttest.Key(2)), 0o644)
	drift := []string{"package", "activate", "--intent", i4, "--layout", s4.Dir, "--trusted-key", otherKey, "--allow-ref", pkgRepo}
	if _, stderr, code := run(t, env, drift...); code != 3 || !strings.Contains(stderr, "signed by none") || !strings.Contains(stderr, "nothing was written") {
		t.Fatalf("activate with drifted evidence: exit %d: %s", code, stderr)
	}
	if got := pointerWrites(t, ns); strings.Join(got, ",") != "create,update" {
		t.Fatalf("audited writes %v, want create,update", got)
	}
	log.ByName(t, "configmaps", "namespaces")
}

// A lost create answer: exit 4 naming inspect, no guess; inspect settles
// it (active); activate replays; exactly one create in the audit log.
func TestPackageActivateLostCreate(t *testing.T) {
	ns := cp.Namespace(t)
	dir := t.TempDir()
	s, _, key := pkgStage(t, dir, "1.0.0")
	f, _ := pkgIntentFile(t, dir, s, ns, 1, "")
	drop := faults.NewDrop(faults.Write(http.MethodPost, "/namespaces/"+ns+"/configmaps"))
	lost := proxied(t, ns, drop.Wrap)
	args := func(verb string) []string {
		return append([]string{"package", verb, "--intent", f}, stageArgs(s, key)...)
	}
	out, stderr, code := run(t, lost, args("activate")...)
	if code != 4 || out != "" || !strings.Contains(stderr, "package inspect --intent "+f) || drop.Fired() != 1 {
		t.Fatalf("lost create: exit %d (fired %d): %s", code, drop.Fired(), stderr)
	}
	if out := mustRun(t, nil, args("inspect")...); !strings.Contains(out, ": active") {
		t.Fatalf("inspect settles: %s", out)
	}
	if out := mustRun(t, nil, args("activate")...); !strings.Contains(out, ": replayed") {
		t.Fatalf("after settling: %s", out)
	}
	if got := pointerWrites(t, ns); strings.Join(got, ",") != "create" {
		t.Fatalf("audited writes %v, want one create", got)
	}
}

// 8 racing processes, each its own user through its own proxy, every
// third losing its write's answer: exactly one winner per generation,
// the lost ones settled by inspect.
func TestPackageActivateRace(t *testing.T) {
	ns := cp.Namespace(t)
	dir := t.TempDir()
	const n = 8
	prev := ""
	for gen := int64(1); gen <= 2; gen++ {
		type racer struct {
			file, key string
			s         *stagelayouttest.Stage
			env       []string
			code      int
			stderr    string
		}
		rs := make([]*racer, n)
		for i := range rs {
			s, _, key := pkgStage(t, dir, fmt.Sprintf("%d.%d.0", gen, i))
			f, _ := pkgIntentFile(t, dir, s, ns, gen, prev)
			cfg, err := cp.UserConfig(fmt.Sprintf("pkg-racer-%d-%d", gen, i), "system:masters")
			if err != nil {
				t.Fatal(err)
			}
			var wrap func(http.RoundTripper) http.RoundTripper
			if i%3 == 0 {
				wrap = faults.NewDrop(func(r *http.Request, _ []byte) bool {
					return (r.Method == http.MethodPost || r.Method == http.MethodPut) && strings.Contains(r.URL.Path, "/namespaces/"+ns+"/configmaps")
				}).Wrap
			}
			p, err := faults.NewProxy(cfg, wrap)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(p.Close)
			kc := filepath.Join(dir, fmt.Sprintf("racer-%d-%d.kubeconfig", gen, i))
			if err := p.Kubeconfig(kc, ns); err != nil {
				t.Fatal(err)
			}
			rs[i] = &racer{file: f, key: key, s: s, env: []string{"KUBECONFIG=" + kc}}
		}
		var wg sync.WaitGroup
		for _, r := range rs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cmd := exec.Command(binary, append([]string{"package", "activate", "--intent", r.file}, stageArgs(r.s, r.key)...)...)
				var errb bytes.Buffer
				cmd.Stderr = &errb
				cmd.Env = append(os.Environ(), r.env...)
				err := cmd.Run()
				r.code, r.stderr = cmd.ProcessState.ExitCode(), errb.String()
				_ = err
			}()
		}
		wg.Wait()
		var winners []int
		for i, r := range rs {
			switch r.code {
			case 0:
				winners = append(winners, i)
			case 4:
				out, stderr, code := run(t, nil, append([]string{"package", "inspect", "--intent", r.file}, stageArgs(r.s, r.key)...)...)
				switch {
				case code == 0 && strings.Contains(out, ": active"):
					winners = append(winners, i)
				case code != 3:
					t.Fatalf("racer %d: inspect exit %d: %s %s", i, code, out, stderr)
				}
			case 3:
			default:
				t.Fatalf("racer %d: exit %d: %s", i, r.code, r.stderr)
			}
		}
		if len(winners) != 1 {
			t.Fatalf("generation %d: winners %v", gen, winners)
		}
		prev = rs[winners[0]].s.Evidence.LockDigest
	}
	for _, v := range pointerWrites(t, ns) {
		if v != "create" && v != "update" {
			t.Fatalf("a %s was sent", v)
		}
	}
}

// The printed roles, bound to a user with no other rights, suffice for
// intent, activate and inspect; another package's pointer is refused
// before any write (exit 2, naming package rbac).
func TestPackageRBACCLI(t *testing.T) {
	ns := cp.Namespace(t)
	dir := t.TempDir()
	s, lock, key := pkgStage(t, dir, "3.0.0")
	out := mustRun(t, nil, "package", "rbac", "--project", "demo", "--package", "weather-tools", "-n", ns, "--bind-user", "pkgpub", "-o", "json")
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list.Items) != 4 {
		t.Fatalf("rbac -o json: %v\n%s", err, out)
	}
	ctx := context.Background()
	cs := cp.Clientset()
	var role rbacv1.Role
	var rb rbacv1.RoleBinding
	var cr rbacv1.ClusterRole
	var crb rbacv1.ClusterRoleBinding
	for i, v := range []any{&role, &rb, &cr, &crb} {
		if err := json.Unmarshal(list.Items[i], v); err != nil {
			t.Fatal(err)
		}
	}
	crb.Name += "-" + ns
	if _, err := cs.RbacV1().Roles(ns).Create(ctx, &role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, &rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &cr, metav1.CreateOptions{}); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.RbacV1().ClusterRoleBindings().Delete(context.Background(), crb.Name, metav1.DeleteOptions{})
	})
	kc, err := cp.Kubeconfig("pkgpub")
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"KUBECONFIG=" + kc}
	out = mustRun(t, env, append([]string{"package", "intent", "--lock", lock, "--project", "demo", "--package", "weather-tools", "-n", ns}, stageArgs(s, key)...)...)
	f := filepath.Join(dir, "intent.json")
	os.WriteFile(f, []byte(out), 0o644)
	mustRun(t, env, append([]string{"package", "activate", "--intent", f}, stageArgs(s, key)...)...)
	mustRun(t, env, append([]string{"package", "inspect", "--intent", f}, stageArgs(s, key)...)...)
	other, _ := pkgIntentFile(t, dir, s, ns, 1, "")
	data, _ := os.ReadFile(other)
	os.WriteFile(other, bytes.Replace(data, []byte(`"weather-tools"`), []byte(`"other-tools"`), 1), 0o644)
	if _, stderr, code := run(t, env, append([]string{"package", "activate", "--intent", other}, stageArgs(s, key)...)...); code != 2 || !strings.Contains(stderr, "lacks") || !strings.Contains(stderr, "package rbac") {
		t.Fatalf("another package: exit %d: %s", code, stderr)
	}
	if got := pointerWrites(t, ns); strings.Join(got, ",") != "create" {
		t.Fatalf("audited writes %v", got)
	}
	if out := mustRun(t, nil, "package", "rbac", "--intent", f); !strings.Contains(out, "kind: ClusterRole") || !strings.Contains(out, "- kube-system") {
		t.Fatalf("rbac yaml: %s", out)
	}
}

// Tamper through the binary: a pointer changed outside activate (an extra
// label, binaryData, an owner reference) makes activate and inspect exit
// 5 and is left untouched.
func TestPackageTamperCLI(t *testing.T) {
	ns := cp.Namespace(t)
	dir := t.TempDir()
	s, _, key := pkgStage(t, dir, "4.0.0")
	f, in := pkgIntentFile(t, dir, s, ns, 1, "")
	s2, _, _ := pkgStage(t, dir, "4.0.1")
	f2, _ := pkgIntentFile(t, dir, s2, ns, 2, s.Evidence.LockDigest)
	nm, _ := intent.NamingOf(in)
	cms := cp.Clientset().CoreV1().ConfigMaps(ns)
	ctx := context.Background()
	owner, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		edit func(cm map[string]any)
	}{
		{"extra label", func(cm map[string]any) { cm["metadata"].(map[string]any)["labels"].(map[string]any)["team"] = "x" }},
		{"binaryData", func(cm map[string]any) { cm["binaryData"] = map[string]any{"run": "ZWNobw=="} }},
		{"owner reference", func(cm map[string]any) {
			cm["metadata"].(map[string]any)["ownerReferences"] = []any{map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": string(owner.UID)}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_ = cms.Delete(ctx, nm.Name, metav1.DeleteOptions{})
			mustRun(t, nil, append([]string{"package", "activate", "--intent", f}, stageArgs(s, key)...)...)
			cm, err := cms.Get(ctx, nm.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := json.Marshal(cm)
			var m map[string]any
			json.Unmarshal(raw, &m)
			tc.edit(m)
			raw, _ = json.Marshal(m)
			if err := json.Unmarshal(raw, cm); err != nil {
				t.Fatal(err)
			}
			if cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			for _, args := range [][]string{
				append([]string{"package", "activate", "--intent", f}, stageArgs(s, key)...),
				append([]string{"package", "inspect", "--intent", f}, stageArgs(s, key)...),
				append([]string{"package", "activate", "--intent", f2}, stageArgs(s2, key)...),
			} {
				if _, stderr, code := run(t, nil, args...); code != 5 || !strings.Contains(stderr, "left untouched") {
					t.Errorf("%s: exit %d: %s", args[1], code, stderr)
				}
			}
			after, err := cms.Get(ctx, nm.Name, metav1.GetOptions{})
			if err != nil || after.ResourceVersion != cm.ResourceVersion {
				t.Fatalf("the tampered pointer was touched: %v", err)
			}
		})
	}
}
