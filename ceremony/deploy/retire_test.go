package deploy_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/testcluster"
	"github.com/qinglong/kubectl-ql3/inventory"
	"github.com/qinglong/kubectl-ql3/receipts"
)

// editRelease rewrites dir's kustomization with edit and locks it again
// as version.
func editRelease(t *testing.T, dir, version string, edit func(string) string) {
	t.Helper()
	editReleaseFile(t, dir, "kustomization.yaml", version, edit)
}

// baseRelease is v3.1.0 with the ql3-batch Deployment.
func baseRelease(t *testing.T, ns string) string {
	t.Helper()
	dir := release(t, "v3.1.0", ns, "")
	batch, err := os.ReadFile(filepath.Join("..", "..", "testdata", "retire", "batch.yaml")) // the ql3-batch Deployment
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "batch.yaml"), batch, 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
	editRelease(t, dir, "3.1.0", func(k string) string {
		return strings.Replace(k, "- worker.yaml\n", "- worker.yaml\n- batch.yaml\n", 1)
	})
	return dir
}

// retireRelease is baseRelease without the ql3-features ConfigMap and the
// ql3-batch Deployment, as version 3.2.0: a retire of exactly those two.
func retireRelease(t *testing.T, ns string) string {
	t.Helper()
	dir := release(t, "v3.1.0", ns, "3.2.0")
	editRelease(t, dir, "3.2.0", func(k string) string { return strings.Replace(k, "- features.yaml\n", "", 1) })
	return dir
}

var (
	featuresID = inventory.Identity{APIVersion: "v1", Kind: "ConfigMap", Name: "ql3-features"}
	workerID   = inventory.Identity{APIVersion: "apps/v1", Kind: "Deployment", Name: "ql3-batch"}
)

func in(id inventory.Identity, ns string) inventory.Identity { id.Namespace = ns; return id }

// installed deploys baseRelease (install) and returns its committed Head.
func installed(t *testing.T, o deploy.Options, ns string) *deploy.Head {
	t.Helper()
	deployRelease(t, o, baseRelease(t, ns), deploy.TransitionInstall, deploy.ExpectedHead{})
	return headOf(t, ns)
}

func outcomes(h *deploy.Head) map[string]string {
	out := map[string]string{}
	for _, r := range h.Retired {
		out[r.ID.Name] = r.Outcome
	}
	return out
}

func exists(t *testing.T, id inventory.Identity) *unstructured.Unstructured {
	t.Helper()
	u, err := cluster(t, cp.RESTConfig()).Get(context.Background(), id)
	if isNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func auditChain(t *testing.T, rdir string, want int) {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(rdir, "*"+receipts.FileSuffix))
	if len(paths) != want {
		t.Fatalf("receipts %v, want %d", paths, want)
	}
	rep, err := receipts.Audit([]string{rdir}, receipts.AuditOptions{})
	if err != nil || !rep.OK() {
		b, _ := json.MarshalIndent(rep, "", " ")
		t.Fatalf("audit: %v\n%s", err, b)
	}
}

// install -> upgrade -> retire a ConfigMap and a Deployment by a deployer
// holding exactly what `rbac --retire-from` grants: exactly two deletes,
// each fenced by UID and resourceVersion, by that deployer; the
// controller then collects the Deployment's ReplicaSets; the receipts
// audit as one chain; a rollback across the retire is refused.
func TestRetireLeastPrivilege(t *testing.T) {
	ctx := context.Background()
	ns := targetNamespace(t)
	rdir := t.TempDir()
	admin := options(t, cluster(t, userConfig(t, "alice", "system:masters")), rdir)
	v300 := release(t, "v3.0.0", ns, "")
	v310 := baseRelease(t, ns)
	deployRelease(t, admin, v300, deploy.TransitionInstall, deploy.ExpectedHead{})
	deployRelease(t, admin, v310, deploy.TransitionUpgrade, headOf(t, ns).Expected())
	h2 := headOf(t, ns)
	waitFor(t, "the worker's ReplicaSet", func() bool { return len(workerReplicaSets(t, ns)) > 0 })

	v320 := retireRelease(t, ns)
	fs := filesys.MakeFsOnDisk()
	mapper := cluster(t, cp.RESTConfig()).Mapper()
	newRel, err := inventory.Render(fs, v320, inventory.Options{Mapper: mapper})
	if err != nil {
		t.Fatal(err)
	}
	oldRel, err := inventory.Render(fs, v310, inventory.Options{Mapper: mapper})
	if err != nil {
		t.Fatal(err)
	}
	retiredObjs := deploy.RetiredObjects(oldRel.Objects, newRel.Objects)
	if len(retiredObjs) != 2 {
		t.Fatalf("retired objects %d, want 2", len(retiredObjs))
	}

	// Without delete: refused before any write.
	carol := "carol-" + ns
	noDelete, err := deploy.RBAC(newRel.Objects, ns, mapper, deploy.RBACSubject{User: carol})
	if err != nil {
		t.Fatal(err)
	}
	revoke := cp.GrantAll(t, noDelete)
	cp.WaitGranted(t, carol, noDelete)
	co := options(t, cluster(t, userConfig(t, carol)), rdir)
	_, err = deploy.RunPreflight(ctx, co, deploy.PreflightRequest{Dir: v320, Transition: deploy.TransitionRetire, Expected: h2.Expected(), Out: filepath.Join(t.TempDir(), "pf.json")})
	if fail.ClassOf(err) != fail.Invalid || !strings.Contains(err.Error(), "delete configmaps/ql3-features") || !strings.Contains(err.Error(), "delete deployments.apps/ql3-batch") {
		t.Fatalf("preflight without delete: %v", err)
	}
	pfAdmin := preflight(t, admin, v320, deploy.TransitionRetire, h2.Expected())
	if _, err := deploy.RunApply(ctx, co, deploy.ApplyRequest{Preflight: pfAdmin.Record}); fail.ClassOf(err) != fail.Invalid || !strings.Contains(err.Error(), "delete") {
		t.Fatalf("apply without delete: %v", err)
	}
	if w := writesBy(t, carol, ""); len(w) != 0 {
		t.Fatalf("the deployer without delete wrote: %+v", w)
	}

	// With the printed least privilege (the roles have fixed names: carol's go first).
	revoke()
	bob := "bob-" + ns
	objs, err := deploy.RBACRetire(newRel.Objects, retiredObjs, ns, mapper, deploy.RBACSubject{User: bob})
	if err != nil {
		t.Fatal(err)
	}
	cp.GrantAll(t, objs)
	cp.WaitGranted(t, bob, objs)
	bo := options(t, cluster(t, userConfig(t, bob)), rdir)
	pf, err := deploy.RunPreflight(ctx, bo, deploy.PreflightRequest{Dir: v320, Transition: deploy.TransitionRetire, Expected: h2.Expected(), Out: filepath.Join(t.TempDir(), "pf.json")})
	if err != nil {
		t.Fatalf("preflight retire: %v", err)
	}
	cm := exists(t, in(featuresID, ns))
	if r := pf.Record.Retired; len(r) != 2 || r[0].ID != in(workerID, ns) || r[1].ID != in(featuresID, ns) ||
		r[1].UID != string(cm.GetUID()) || r[1].ResourceVersion != cm.GetResourceVersion() || r[0].Outcome != receipts.OutcomePending {
		t.Fatalf("preflight retired %+v", r)
	}
	res, err := deploy.RunApply(ctx, bo, deploy.ApplyRequest{Preflight: pf.Record})
	if err != nil {
		t.Fatalf("apply retire: %v", err)
	}
	h3 := headOf(t, ns)
	if res.Outcome != "committed" || h3.Transition.Kind != deploy.TransitionRetire || h3.Current.Version != "3.2.0" ||
		outcomes(h3)["ql3-features"] != receipts.OutcomeDeleted || outcomes(h3)["ql3-batch"] != receipts.OutcomeDeleted {
		t.Fatalf("after retire: %+v head %+v", res, h3)
	}
	if exists(t, in(featuresID, ns)) != nil || exists(t, in(workerID, ns)) != nil {
		t.Fatal("a retired object is still there")
	}
	waitFor(t, "the worker's ReplicaSets to be collected", func() bool { return len(workerReplicaSets(t, ns)) == 0 })

	deletes := writesBy(t, bob, "delete")
	if len(deletes) != 2 {
		t.Fatalf("deletes by the deployer: %d, want 2: %+v", len(deletes), deletes)
	}
	for _, e := range deletes {
		var opts metav1.DeleteOptions
		if err := json.Unmarshal(e.RequestObject, &opts); err != nil {
			t.Fatal(err)
		}
		p := opts.Preconditions
		want := pf.Record.Retired[0]
		if e.ObjectRef.Name == featuresID.Name {
			want = pf.Record.Retired[1]
		}
		if p == nil || p.UID == nil || p.ResourceVersion == nil || string(*p.UID) != want.UID || *p.ResourceVersion != want.ResourceVersion {
			t.Fatalf("delete of %s without the recorded preconditions: %s", e.ObjectRef.Name, e.RequestObject)
		}
	}
	auditChain(t, rdir, 3)
	r, err := deploy.ReceiptFromHead(h3)
	if err != nil || len(r.Retired) != 2 {
		t.Fatalf("receipt %+v: %v", r, err)
	}

	// Rollback across the retire: refused, and says why.
	_, err = deploy.RunPreflight(ctx, admin, deploy.PreflightRequest{Dir: v310, Transition: deploy.TransitionRollback, Expected: h3.Expected(), Out: filepath.Join(t.TempDir(), "rb.json")})
	if fail.ClassOf(err) != fail.Invalid || !strings.Contains(err.Error(), "because of the retirement") {
		t.Fatalf("rollback after retire: %v", err)
	}
}

// Modified between preflight and apply: not deleted, exit 3 naming both
// resourceVersions, nothing further deleted, the Head stays applying; then
// `resume --leave-changed` commits with "left: changed".
func TestRetireChangedThenLeaveChanged(t *testing.T) {
	ctx := context.Background()
	ns := targetNamespace(t)
	rdir := t.TempDir()
	o := options(t, cluster(t, userConfig(t, "alice", "system:masters")), rdir)
	h := installed(t, o, ns)
	pf := preflight(t, o, retireRelease(t, ns), deploy.TransitionRetire, h.Expected())
	cms := cp.Clientset().CoreV1().ConfigMaps(ns)
	cm, err := cms.Get(ctx, featuresID.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	recorded := cm.ResourceVersion
	cm.Data["batch-size"] = "128"
	if cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = deploy.RunApply(ctx, o, deploy.ApplyRequest{Preflight: pf.Record})
	if fail.ClassOf(err) != fail.Conflict || !strings.Contains(err.Error(), recorded) || !strings.Contains(err.Error(), cm.ResourceVersion) || !strings.Contains(err.Error(), "--leave-changed") {
		t.Fatalf("apply over a changed object: %v", err)
	}
	if h := headOf(t, ns); h.Phase != deploy.PhaseApplying {
		t.Fatalf("head %s, want applying", h.Phase)
	}
	if exists(t, in(featuresID, ns)) == nil || exists(t, in(workerID, ns)) == nil {
		t.Fatal("an object was deleted after the precondition failed") // the ConfigMap is deleted first
	}
	// resume without a decision fails the same way.
	if _, err := deploy.RunApply(ctx, o, deploy.ApplyRequest{Preflight: pf.Record, Resume: true}); fail.ClassOf(err) != fail.Conflict {
		t.Fatalf("resume: %v", err)
	}
	res, err := deploy.RunApply(ctx, o, deploy.ApplyRequest{Preflight: pf.Record, Resume: true, LeaveChanged: true})
	if err != nil {
		t.Fatalf("resume --leave-changed: %v", err)
	}
	h2 := headOf(t, ns)
	if res.Outcome != "committed" || outcomes(h2)["ql3-features"] != receipts.OutcomeLeftChanged || outcomes(h2)["ql3-batch"] != receipts.OutcomeDeleted {
		t.Fatalf("after resume: %+v", h2.Retired)
	}
	if exists(t, in(featuresID, ns)) == nil || exists(t, in(workerID, ns)) != nil {
		t.Fatal("left: changed must stay, the worker must be gone")
	}
	auditChain(t, rdir, 2)
}

// Deleted and recreated by someone else: the new object is left and
// reported; the other one is deleted.
func TestRetireRecreatedIsLeft(t *testing.T) {
	ctx := context.Background()
	ns := targetNamespace(t)
	rdir := t.TempDir()
	o := options(t, cluster(t, userConfig(t, "alice", "system:masters")), rdir)
	h := installed(t, o, ns)
	pf := preflight(t, o, retireRelease(t, ns), deploy.TransitionRetire, h.Expected())
	cms := cp.Clientset().CoreV1().ConfigMaps(ns)
	if err := cms.Delete(ctx, featuresID.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	fresh, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: featuresID.Name}, Data: map[string]string{"someone": "else"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := deploy.RunApply(ctx, o, deploy.ApplyRequest{Preflight: pf.Record}); err != nil {
		t.Fatal(err)
	}
	h2 := headOf(t, ns)
	if outcomes(h2)["ql3-features"] != receipts.OutcomeLeftRecreated || outcomes(h2)["ql3-batch"] != receipts.OutcomeDeleted {
		t.Fatalf("outcomes %+v", h2.Retired)
	}
	if u := exists(t, in(featuresID, ns)); u == nil || u.GetUID() != fresh.UID {
		t.Fatal("the recreated ConfigMap was not left alone")
	}
	auditChain(t, rdir, 2)
}

// A finalizer holds the object: apply waits, --timeout ends it with exit
// 4 and the Head applying; once the finalizer is removed, resume commits.
func TestRetireFinalizerTimeoutThenResume(t *testing.T) {
	ctx := context.Background()
	ns := targetNamespace(t)
	rdir := t.TempDir()
	o := options(t, cluster(t, userConfig(t, "alice", "system:masters")), rdir)
	h := installed(t, o, ns)
	cms := cp.Clientset().CoreV1().ConfigMaps(ns)
	cm, err := cms.Get(ctx, featuresID.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Finalizers = []string{"qinglong.io/test-hold"}
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	pf := preflight(t, o, retireRelease(t, ns), deploy.TransitionRetire, h.Expected())
	short := o
	short.Timeout = 3 * time.Second
	start := time.Now()
	_, err = deploy.RunApply(ctx, short, deploy.ApplyRequest{Preflight: pf.Record})
	if fail.ClassOf(err) != fail.Unavailable || !strings.Contains(err.Error(), "qinglong.io/test-hold") {
		t.Fatalf("apply held by a finalizer: %v", err)
	}
	if time.Since(start) > time.Minute {
		t.Fatalf("--timeout not honoured: %s", time.Since(start))
	}
	if h := headOf(t, ns); h.Phase != deploy.PhaseApplying {
		t.Fatalf("head %s, want applying", h.Phase)
	}
	cm, err = cms.Get(ctx, featuresID.Name, metav1.GetOptions{})
	if err != nil || cm.DeletionTimestamp == nil {
		t.Fatalf("want the ConfigMap terminating: %v %+v", err, cm)
	}
	cm.Finalizers = nil
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := deploy.RunApply(ctx, o, deploy.ApplyRequest{Preflight: pf.Record, Resume: true}); err != nil {
		t.Fatalf("resume: %v", err)
	}
	h2 := headOf(t, ns)
	if h2.Phase != deploy.PhaseCommitted || !receipts.IsFinalOutcome(outcomes(h2)["ql3-features"]) || exists(t, in(featuresID, ns)) != nil {
		t.Fatalf("after resume: %+v", h2.Retired)
	}
	auditChain(t, rdir, 2)
}

// The answer to a delete is lost after the server deleted: the delete
// settles by reading, and the retire commits with "deleted".
func TestRetireLostDeleteResponse(t *testing.T) {
	ctx := context.Background()
	ns := targetNamespace(t)
	rdir := t.TempDir()
	o := options(t, cluster(t, userConfig(t, "alice", "system:masters")), rdir)
	h := installed(t, o, ns)
	pf := preflight(t, o, retireRelease(t, ns), deploy.TransitionRetire, h.Expected())
	cfg, drop := withDrop(userConfig(t, "alice", "system:masters"), func(r *http.Request, body []byte) bool {
		return r.Method == http.MethodDelete && strings.Contains(r.URL.Path, "/configmaps/"+featuresID.Name) && !strings.Contains(r.URL.RawQuery, "dryRun")
	})
	lossy := options(t, cluster(t, cfg), rdir)
	if _, err := deploy.RunApply(ctx, lossy, deploy.ApplyRequest{Preflight: pf.Record}); err != nil {
		t.Fatalf("apply with a lost delete answer: %v", err)
	}
	if drop.fired.Load() == 0 {
		t.Fatal("no delete answer was dropped")
	}
	h2 := headOf(t, ns)
	if outcomes(h2)["ql3-features"] != receipts.OutcomeDeleted || exists(t, in(featuresID, ns)) != nil {
		t.Fatalf("outcomes %+v", h2.Retired)
	}
	auditChain(t, rdir, 2)
}

func workerReplicaSets(t *testing.T, ns string) []string {
	t.Helper()
	list, err := cp.Clientset().AppsV1().ReplicaSets(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, rs := range list.Items {
		for _, ref := range rs.OwnerReferences {
			if ref.Kind == "Deployment" && ref.Name == workerID.Name {
				out = append(out, rs.Name)
			}
		}
	}
	return out
}

// waitFor waits until ok holds, reading it again every 250ms for at most
// a minute.
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(context.Context) (bool, error) { return ok(), nil }); err != nil {
		t.Fatalf("timed out waiting for %s", what)
	}
}

func writesBy(t *testing.T, user, verb string) []testcluster.AuditEvent {
	t.Helper()
	w, err := cp.Writes(func(e testcluster.AuditEvent) bool {
		return e.User.Username == user && (verb == "" || e.Verb == verb)
	})
	if err != nil {
		t.Fatal(err)
	}
	return w
}
