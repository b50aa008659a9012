package plugin_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/ceremony/views"
	"github.com/qinglong/kubectl-ql3/internal/testcluster"
)

// viewsRelease is releaseCopy plus a Secret holding secret, the config
// log level and the worker image, locked with --allow-secret-data.
func viewsRelease(t *testing.T, fixture, ns, secret, logLevel, image string) string {
	t.Helper()
	dir := releaseCopy(t, fixture, ns, "")
	edit := func(name, old, new string) {
		p := filepath.Join(dir, name)
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), old) {
			t.Fatalf("%s: %q not found", name, old)
		}
		if err := os.WriteFile(p, []byte(strings.Replace(string(data), old, new, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "secret.yaml"), []byte("apiVersion: v1\nkind: Secret\nmetadata:\n  name: ql3-token\ntype: Opaque\nstringData:\n  token: "+secret+"\n  user: ops\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	edit("kustomization.yaml", "- config.yaml\n", "- config.yaml\n- secret.yaml\n")
	edit("config.yaml", "log-level: ", "log-level: "+logLevel+" #")
	if image != "" {
		edit("worker.yaml", "image: registry.k8s.io/pause:3.10.1@sha256:c204928bc0cb6e2054f8063f63ad2431ae024aca123d368b3268d305a0645db5", "image: "+image)
	}
	if err := os.Remove(filepath.Join(dir, "ql3.lock.yaml")); err != nil {
		t.Fatal(err)
	}
	version := strings.TrimPrefix(fixture, "v")
	mustRun(t, nil, "lock", dir, "--version", version, "--allow-secret-data")
	return dir
}

// The three views through the built binary: diff before an upgrade that
// changes a ConfigMap value, a Deployment image and a Secret (whose
// values never appear), preflight --diff binding the same change list,
// history over install, upgrade and rollback with one receipt missing and
// one signed, and status after someone edits, deletes and scales.
func TestCLIViews(t *testing.T) {
	const oldCanary, newCanary = "canary-old-5d1e0b7c", "canary-new-a93f44e2"
	ns := controlNamespace(t)
	v310 := viewsRelease(t, "v3.1.0", ns, oldCanary, "info", "")
	v311 := viewsRelease(t, "v3.1.1", ns, newCanary, "debug", "registry.k8s.io/pause:3.10@sha256:ee6521f290b2168b6e0935a181d4cff9be1ac3f505666ef0e3c98fae8199917a")
	work := t.TempDir()
	rdir := filepath.Join(work, "receipts")
	sec := []string{"--allow-secret-data"}
	canaries := func(what, s string) {
		t.Helper()
		for _, c := range []string{oldCanary, newCanary} {
			for _, form := range []string{c, base64.StdEncoding.EncodeToString([]byte(c))} {
				if strings.Contains(s, form) {
					t.Fatalf("%s shows a Secret value (%q):\n%s", what, form, s)
				}
			}
		}
	}

	// Before the install: everything would be created.
	out, stderr, code := run(t, nil, append([]string{"diff", v310, "-o", "json"}, sec...)...)
	canaries("diff before install", out+stderr)
	var rep views.DiffReport
	// The control namespace exists already (it holds the Head), so only
	// its labels change; every other object would be created — but the
	// cluster-scoped CRD, which other tests of this package may have
	// installed already (then changed, or unchanged).
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil {
		t.Fatalf("diff before install: exit %d %+v\n%s", code, rep, stderr)
	}
	for _, o := range rep.Objects {
		want := "created"
		switch {
		case o.Object.Kind == "Namespace":
			want = "changed"
		case o.Object.Kind == "CustomResourceDefinition" && o.Change != "created":
			continue
		}
		if o.Change != want {
			t.Errorf("diff before install: %s is %s, want %s", o.Object, o.Change, want)
		}
	}
	for _, o := range rep.Objects {
		// The Widget's kind comes with the release's CRD: not dry-run
		// yet, the rendered object stands in, and the entry says so
		// (unless another test of the package installed the CRD already).
		if o.Object.Kind != "Widget" && o.Note != "" || o.Object.Kind == "Widget" && o.Note == "" && o.Change == "created" && !crdServed(t) {
			t.Errorf("%s: note %q", o.Object, o.Note)
		}
	}
	pf := filepath.Join(work, "install.json")
	mustRun(t, nil, append([]string{"preflight", v310, "--transition", "install", "--expected-head", headToken(t, nil, ns), "--out", pf}, sec...)...)
	mustRun(t, nil, append([]string{"apply", "--preflight", pf, "--receipts-dir", rdir}, sec...)...)
	if data, _ := os.ReadFile(pf); strings.Contains(string(data), "diffDigest") {
		t.Fatalf("a preflight without --diff records a diffDigest: %s", data)
	}

	// Nothing to change: exit 0 even with --exit-code.
	out, stderr, code = run(t, nil, append([]string{"diff", v310, "--exit-code"}, sec...)...)
	if code != 0 || strings.Contains("\n"+out, "\nchanged ") || strings.Contains("\n"+out, "\ncreated ") || !strings.Contains(out, "0 created, 0 changed") {
		t.Fatalf("diff of the installed release: exit %d\n%s\n%s", code, out, stderr)
	}

	// The upgrade's diff, human and structured.
	out, stderr, code = run(t, nil, append([]string{"diff", v311}, sec...)...)
	canaries("diff", out+stderr)
	if code != 0 {
		t.Fatalf("diff: exit %d\n%s", code, stderr)
	}
	for _, want := range []string{
		"-  log-level: info", "+  log-level: debug",
		"-        image: registry.k8s.io/pause:3.10.1@", "+        image: registry.k8s.io/pause:3.10@",
		"token: " + views.ValueChanged, "user: " + views.ValueMasked,
		"changed   v1/Secret/" + ns + "/ql3-token",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("diff does not show %q:\n%s", want, out)
		}
	}
	if _, _, code := run(t, nil, append([]string{"diff", v311, "--exit-code"}, sec...)...); code != 1 {
		t.Errorf("diff --exit-code with changes: exit %d, want 1", code)
	}
	out, stderr, code = run(t, nil, append([]string{"diff", v311, "-o", "json"}, sec...)...)
	canaries("diff -o json", out+stderr)
	rep = views.DiffReport{}
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil {
		t.Fatalf("diff -o json: exit %d %s", code, stderr)
	}
	changes := map[string]string{}
	for _, o := range rep.Objects {
		changes[o.Object.Kind+"/"+o.Object.Name] = o.Change
	}
	if changes["ConfigMap/ql3-config"] != views.Changed || changes["Deployment/ql3-worker"] != views.Changed || changes["Secret/ql3-token"] != views.Changed {
		t.Errorf("change list: %v", changes)
	}
	if want, err := views.DiffDigest(rep.Objects); err != nil || rep.Digest != want {
		t.Errorf("diff digest %s, recomputed %s (%v)", rep.Digest, want, err)
	}

	// preflight --diff prints the same list and binds its digest, and
	// dry-runs each object once, as diff does (it reuses the preflight's
	// dry-run answers): counted in the API server's audit log.
	dryRunsIn := func() int {
		t.Helper()
		evs, err := cp.Events(func(e testcluster.AuditEvent) bool {
			return e.Stage == "ResponseComplete" && e.DryRun() && e.ObjectRef.Namespace == ns
		})
		if err != nil {
			t.Fatal(err)
		}
		return len(evs)
	}
	token := headToken(t, nil, ns)
	d0 := dryRunsIn()
	mustRun(t, nil, append([]string{"diff", v311}, sec...)...)
	d1 := dryRunsIn()
	pf = filepath.Join(work, "upgrade.json")
	out, stderr, code = run(t, nil, append([]string{"preflight", v311, "--transition", "upgrade", "--expected-head", token, "--out", pf, "--diff"}, sec...)...)
	if diffRuns, preflightRuns := d1-d0, dryRunsIn()-d1; diffRuns == 0 || preflightRuns != diffRuns {
		t.Errorf("preflight --diff sent %d dry-run(s) in %s, diff %d: want one per object each", preflightRuns, ns, diffRuns)
	}
	canaries("preflight --diff", out+stderr)
	if code != 0 || !strings.Contains(out, "+  log-level: debug") || !strings.Contains(out, rep.Digest) {
		t.Fatalf("preflight --diff: exit %d\n%s\n%s", code, out, stderr)
	}
	rec, err := deploy.ReadPreflight(pf)
	if err != nil || rec.DiffDigest != rep.Digest {
		t.Fatalf("preflight record diffDigest %q, diff printed %s (%v)", rec.DiffDigest, rep.Digest, err)
	}
	// Again with -o json: a replay of the same record, the change list
	// in the result.
	out, stderr, code = run(t, nil, append([]string{"preflight", v311, "--transition", "upgrade", "--expected-head", headToken(t, nil, ns), "--out", pf, "--diff", "-o", "json"}, sec...)...)
	canaries("preflight --diff -o json", out+stderr)
	var pres struct {
		Replayed bool              `json:"replayed"`
		Diff     *views.DiffReport `json:"diff"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &pres) != nil || !pres.Replayed || pres.Diff == nil || pres.Diff.Digest != rep.Digest {
		t.Fatalf("preflight --diff -o json: exit %d\n%s\n%s", code, out, stderr)
	}
	out = mustRun(t, nil, append([]string{"diff", v311, "-o", "name"}, sec...)...)
	for _, want := range []string{"configmap/ql3-config\n", "secret/ql3-token\n", "deployment.apps/ql3-worker\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("diff -o name lacks %q:\n%s", want, out)
		}
	}
	key, _ := writeEd25519(t, work, "ops")
	mustRun(t, nil, append([]string{"apply", "--preflight", pf, "--receipts-dir", rdir, "--sign-key", key}, sec...)...)
	mustRun(t, nil, append([]string{"rollback", v310, "--expected-head", headToken(t, nil, ns), "--out", filepath.Join(work, "rollback.json"), "--receipts-dir", rdir}, sec...)...)

	// Read-only: diff, status and history write nothing.
	writesIn := func() int {
		t.Helper()
		ws, err := cp.Writes(func(e testcluster.AuditEvent) bool { return e.ObjectRef.Namespace == ns })
		if err != nil {
			t.Fatal(err)
		}
		return len(ws)
	}
	before := writesIn()

	// History: install, upgrade (signed), rollback.
	out, stderr, code = run(t, nil, "history", rdir, "-o", "json")
	var hist views.HistoryReport
	if code != 0 || json.Unmarshal([]byte(out), &hist) != nil || len(hist.Entries) != 3 {
		t.Fatalf("history: exit %d\n%s\n%s", code, out, stderr)
	}
	wantRows := []struct {
		kind, version string
		added         int
		signed        bool
	}{{"install", "3.1.0", 0, false}, {"upgrade", "3.1.1", 0, true}, {"rollback", "3.1.0", 0, false}}
	for i, w := range wantRows {
		e := hist.Entries[i]
		if e.Generation != int64(i+1) || e.Transition != w.kind || e.Version != w.version || e.ToolVersion != "0.1.0-test" && e.ToolVersion != "v0.1.0-test" || e.Inventory == 0 || (e.SignatureKey != "") != w.signed || !e.PreviousKnown {
			t.Errorf("history row %d: %+v", i, e)
		}
		if i > 0 && (len(e.Added) != w.added || len(e.Retired) != 0) {
			t.Errorf("history row %d: added %v retired %v", i, e.Added, e.Retired)
		}
	}
	if len(hist.Entries[0].Added) != hist.Entries[0].Inventory {
		t.Errorf("install adds its whole inventory: %+v", hist.Entries[0])
	}
	// One receipt missing: the chain is reported broken (exit 5), the
	// rest still listed, and with -n the Head's generation is marked and
	// the gap flagged.
	entries, _ := filepath.Glob(filepath.Join(rdir, "000001-*"))
	for _, e := range entries {
		if err := os.Rename(e, filepath.Join(work, filepath.Base(e))); err != nil {
			t.Fatal(err)
		}
	}
	out, stderr, code = run(t, nil, "history", rdir, "-n", ns)
	if code != 5 || !strings.Contains(out, "generation 1 is missing") || !strings.Contains(out, "generation 1, which the Head has passed (it is at generation 3), has no receipt here") || !strings.Contains(out, "3 *") || !strings.Contains(stderr, "does not verify") {
		t.Fatalf("history with generation 1 missing: exit %d\n%s\n%s", code, out, stderr)
	}
	out, _, _ = run(t, nil, "history", rdir, "-n", ns, "-o", "json")
	hist = views.HistoryReport{}
	if err := json.Unmarshal([]byte(out), &hist); err != nil || hist.Head == nil || hist.Head.Generation != 3 || len(hist.Head.MissingLocally) != 1 || hist.Head.MissingLocally[0] != 1 || len(hist.Entries) != 2 || !hist.Entries[1].AtHead || hist.Entries[0].PreviousKnown {
		t.Fatalf("history -o json with generation 1 missing: %v %s", err, out)
	}

	// Status: in sync after the rollback.
	out, stderr, code = run(t, nil, "status", "-n", ns)
	if code != 0 || !strings.Contains(out, "generation 3 (committed), rollback 3.1.0") {
		t.Fatalf("status after rollback: exit %d\n%s\n%s", code, out, stderr)
	}
	if out, stderr, code := run(t, nil, "status", "-n", ns, "--watch"); code != 0 || strings.Count(out, "Head:") != 1 {
		t.Fatalf("status --watch in sync: exit %d\n%s\n%s", code, out, stderr)
	}
	if after := writesIn(); after != before {
		t.Fatalf("diff, history and status wrote %d time(s) to %s", after-before, ns)
	}

	// Someone edits a managed field with another field manager, deletes
	// an object and scales a Deployment.
	ctx := context.Background()
	cs := cp.Clientset()
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "ql3-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["log-level"] = "trace"
	if _, err := cs.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{FieldManager: "hotfixer"}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Services(ns).Delete(ctx, "ql3-admin", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.AppsV1().Deployments(ns).UpdateScale(ctx, "ql3-control", &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: "ql3-control", Namespace: ns}, Spec: autoscalingv1.ScaleSpec{Replicas: 2},
	}, metav1.UpdateOptions{FieldManager: "scaler"}); err != nil {
		t.Fatal(err)
	}
	out, stderr, code = run(t, nil, "status", "-n", ns, "-o", "json")
	var st views.StatusReport
	if code != 3 || json.Unmarshal([]byte(out), &st) != nil {
		t.Fatalf("status after edits: exit %d\n%s\n%s", code, out, stderr)
	}
	byName := map[string]views.ObjectStatus{}
	for _, o := range st.Objects {
		byName[o.Object.Kind+"/"+o.Object.Name] = o
	}
	drifted := func(key, field, manager string) {
		t.Helper()
		o := byName[key]
		for _, d := range o.Drift {
			if d.Field == field && d.Manager == manager {
				if o.State != views.StateDrifted {
					t.Errorf("%s: state %s with drift %v", key, o.State, o.Drift)
				}
				return
			}
		}
		t.Errorf("%s: no drift of %s by %s: %+v", key, field, manager, o)
	}
	drifted("ConfigMap/ql3-config", ".data.log-level", "hotfixer")
	drifted("Deployment/ql3-control", ".spec.replicas", "scaler")
	if o := byName["Service/ql3-admin"]; o.State != views.StateMissing {
		t.Errorf("deleted Service: %+v", o)
	}
	if st.Missing != 1 || st.Drifted != 2 || st.InSync {
		t.Errorf("status counts: missing %d drifted %d inSync %v\n%s", st.Missing, st.Drifted, st.InSync, out)
	}
	for key, o := range byName {
		if key != "ConfigMap/ql3-config" && key != "Deployment/ql3-control" && key != "Service/ql3-admin" && o.State == views.StateDrifted {
			t.Errorf("%s drifted without anyone touching it: %+v", key, o.Drift)
		}
	}
	out, _, code = run(t, nil, "status", "-n", ns)
	t.Logf("status after edit, delete and scale:\n%s", out)
	if code != 3 || !strings.Contains(out, `.data.log-level now owned by "hotfixer"`) || !strings.Contains(out, "missing") {
		t.Errorf("status human output: exit %d\n%s", code, out)
	}
	// --watch gives up at --timeout with the last report's class, having
	// printed an unchanged report once.
	start := time.Now()
	out, _, code = run(t, nil, "status", "-n", ns, "--watch", "--interval", "200ms", "--timeout", "1s")
	if code != 3 || strings.Count(out, "Head:") != 1 || time.Since(start) < 800*time.Millisecond {
		t.Errorf("status --watch while drifted: exit %d after %s\n%s", code, time.Since(start), out)
	}
	if _, err := cs.CoreV1().Services(ns).Get(ctx, "ql3-admin", metav1.GetOptions{}); err == nil {
		t.Errorf("status recreated the deleted Service")
	}
}

// What `kubectl ql3 rbac` grants is enough for diff, status and history
// -n: they need get (and, for diff and status --release, the dry-run's
// patch) on the release's objects, get on the Head and on the kube-system
// Namespace; no list, no watch.
func TestViewsLeastPrivilege(t *testing.T) {
	ns := controlNamespace(t)
	v300 := releaseCopy(t, "v3.0.0", ns, "")
	work := t.TempDir()
	user := "viewer-" + ns
	rbac := mustRun(t, nil, "rbac", v300, "--bind-user", user)
	cp.KubectlApply(t, rbac)
	kc, err := cp.Kubeconfig(user)
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"KUBECONFIG=" + kc}
	pf := filepath.Join(work, "install.json")
	rdir := filepath.Join(work, "r")
	mustRun(t, env, "preflight", v300, "--transition", "install", "--expected-head", headToken(t, env, ns), "--out", pf)
	mustRun(t, env, "apply", "--preflight", pf, "--receipts-dir", rdir)
	viewsFrom := time.Now() // apply may watch the release's workloads by name: the views may not
	if out, stderr, code := run(t, env, "diff", v300, "--exit-code"); code != 0 || !strings.Contains(out, "0 created, 0 changed") {
		t.Fatalf("diff as the deployer: exit %d\n%s\n%s", code, out, stderr)
	}
	if out, stderr, code := run(t, env, "status", "-n", ns); code != 0 {
		t.Fatalf("status as the deployer: exit %d\n%s\n%s", code, out, stderr)
	}
	if out, stderr, code := run(t, env, "status", "-n", ns, "--release", v300); code != 0 || !strings.Contains(out, "Release:     compared") {
		t.Fatalf("status --release as the deployer: exit %d\n%s\n%s", code, out, stderr)
	}
	if out, stderr, code := run(t, env, "history", rdir, "-n", ns); code != 0 || !strings.Contains(out, "1 *") {
		t.Fatalf("history -n as the deployer: exit %d\n%s\n%s", code, out, stderr)
	}
	reads, err := cp.Reads(func(e testcluster.AuditEvent) bool {
		return e.User.Username == user && e.StageTimestamp.After(viewsFrom) && (e.Verb == "list" || (e.Verb == "watch" && e.Stage == "ResponseStarted"))
	})
	if err != nil || len(reads) != 0 {
		t.Fatalf("the views listed or watched: %v %+v", err, reads)
	}
}

// crdServed reports whether the fixtures' Widget kind is already served
// (the CRD is cluster-scoped: another test of the package may have
// installed it).
func crdServed(t *testing.T) bool {
	t.Helper()
	_, err := cp.Clientset().Discovery().ServerResourcesForGroupVersion("demo.qinglong.io/v1")
	return err == nil
}
