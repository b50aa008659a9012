package plugin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/internal/testcluster"
	"github.com/qinglong/kubectl-ql3/receipts"
)

// relock rewrites dir's kustomization with edit and locks it again.
func relock(t *testing.T, dir, version string, edit func(string) string) {
	t.Helper()
	kpath := filepath.Join(dir, "kustomization.yaml")
	k, err := os.ReadFile(kpath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kpath, []byte(edit(string(k))), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "ql3.lock.yaml")); err != nil {
		t.Fatal(err)
	}
	mustRun(t, nil, "lock", dir, "--version", version)
}

// retireReleases are v3.1.0 with the ql3-batch Deployment, and 3.2.0: the
// same without ql3-batch and the ql3-features ConfigMap.
func retireReleases(t *testing.T, ns string) (base, retired string) {
	t.Helper()
	base = releaseCopy(t, "v3.1.0", ns, "")
	batch, err := os.ReadFile(filepath.Join("..", "testdata", "retire", "batch.yaml")) // the ql3-batch Deployment
	if err == nil {
		err = os.WriteFile(filepath.Join(base, "batch.yaml"), batch, 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
	relock(t, base, "3.1.0", func(k string) string {
		return strings.Replace(k, "- worker.yaml\n", "- worker.yaml\n- batch.yaml\n", 1)
	})
	retired = releaseCopy(t, "v3.1.0", ns, "3.2.0")
	relock(t, retired, "3.2.0", func(k string) string { return strings.Replace(k, "- features.yaml\n", "", 1) })
	return base, retired
}

// installedForRetire installs retireReleases' base (3.1.0 with ql3-batch)
// in ns, and returns it, the 3.2.0 release that retires from it, the work
// directory and the receipts directory the install wrote to.
func installedForRetire(t *testing.T, ns string) (base, v320, work, rdir string) {
	t.Helper()
	base, v320 = retireReleases(t, ns)
	work = t.TempDir()
	rdir = filepath.Join(work, "receipts")
	pf0 := filepath.Join(work, "install.json")
	mustRun(t, nil, "preflight", base, "--transition", "install", "--expected-head", headToken(t, nil, ns), "--out", pf0)
	mustRun(t, nil, "apply", "--preflight", pf0, "--receipts-dir", rdir)
	return base, v320, work, rdir
}

// The retire through the built binary, by a deployer holding exactly what
// `rbac --retire-from` prints: preflight prints each retired object's UID
// and resourceVersion, apply deletes exactly those two (fenced), the
// receipts audit as one chain, and a rollback across the retire is refused.
func TestCLIRetire(t *testing.T) {
	ns := controlNamespace(t)
	base, v320, work, rdir := installedForRetire(t, ns)

	rbac := mustRun(t, nil, "rbac", v320, "--retire-from", base, "--bind-user", "retirer-"+ns)
	if n := strings.Count(rbac, "- delete"); n != 2 {
		t.Fatalf("rbac --retire-from grants delete %d times, want 2 (configmaps and deployments, by name):\n%s", n, rbac)
	}
	if plain := mustRun(t, nil, "rbac", v320); strings.Contains(plain, "delete") {
		t.Fatalf("rbac without --retire-from grants delete:\n%s", plain)
	}
	cp.KubectlApply(t, rbac)
	kc, err := cp.Kubeconfig("retirer-" + ns)
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"KUBECONFIG=" + kc}
	cm, err := cp.Clientset().CoreV1().ConfigMaps(ns).Get(context.Background(), "ql3-features", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pf := filepath.Join(work, "retire.json")
	out := mustRun(t, env, "preflight", v320, "--transition", "retire", "--expected-head", headToken(t, env, ns), "--out", pf)
	if want := "retire v1/ConfigMap/" + ns + "/ql3-features: uid " + string(cm.UID) + " resourceVersion " + cm.ResourceVersion; !strings.Contains(out, want) {
		t.Fatalf("preflight output lacks %q:\n%s", want, out)
	}
	out = mustRun(t, env, "apply", "--preflight", pf, "--receipts-dir", rdir)
	for _, want := range []string{"committed: generation 2, retire 3.2.0", "retired apps/v1/Deployment/" + ns + "/ql3-batch: deleted", "retired v1/ConfigMap/" + ns + "/ql3-features: deleted"} {
		if !strings.Contains(out, want) {
			t.Fatalf("apply output lacks %q:\n%s", want, out)
		}
	}
	deletes, err := cp.Writes(func(e testcluster.AuditEvent) bool { return e.User.Username == "retirer-"+ns && e.Verb == "delete" })
	if err != nil || len(deletes) != 2 {
		t.Fatalf("deletes by the deployer: %d (%v), want 2", len(deletes), err)
	}
	for _, e := range deletes {
		if !strings.Contains(string(e.RequestObject), `"preconditions":{"uid":`) {
			t.Fatalf("a delete without preconditions: %s", e.RequestObject)
		}
	}
	audit := mustRun(t, nil, "receipt", "audit", rdir, "--release", v320, "-o", "json")
	var rep receipts.Report
	if err := json.Unmarshal([]byte(audit), &rep); err != nil || !rep.OK() {
		t.Fatalf("audit: %v\n%s", err, audit)
	}
	_, stderr, code := run(t, nil, "rollback", base, "--expected-head", headToken(t, nil, ns), "--out", filepath.Join(work, "rb.json"), "--receipts-dir", rdir)
	if code != 2 || !strings.Contains(stderr, "because of the retirement") {
		t.Fatalf("rollback after retire: exit %d: %s", code, stderr)
	}
}

// Changed after the preflight: apply exits 3 naming both resourceVersions
// and deletes nothing further; resume --leave-changed commits.
func TestCLIRetireChanged(t *testing.T) {
	ctx := context.Background()
	ns := controlNamespace(t)
	_, v320, work, rdir := installedForRetire(t, ns)
	pf := filepath.Join(work, "retire.json")
	mustRun(t, nil, "preflight", v320, "--transition", "retire", "--expected-head", headToken(t, nil, ns), "--out", pf)
	cms := cp.Clientset().CoreV1().ConfigMaps(ns)
	cm, err := cms.Get(ctx, "ql3-features", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	recorded := cm.ResourceVersion
	cm.Data["batch-size"] = "256"
	if cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := run(t, nil, "apply", "--preflight", pf, "--receipts-dir", rdir)
	if code != 3 || !strings.Contains(stderr, "resourceVersion "+recorded+" recorded, "+cm.ResourceVersion+" now") || !strings.Contains(stderr, "--leave-changed") {
		t.Fatalf("apply over a changed object: exit %d: %s", code, stderr)
	}
	if _, err := cp.Clientset().AppsV1().Deployments(ns).Get(ctx, "ql3-batch", metav1.GetOptions{}); err != nil {
		t.Fatalf("deleted after the precondition failed: %v", err)
	}
	out := mustRun(t, nil, "resume", "--preflight", pf, "--receipts-dir", rdir, "--leave-changed")
	if !strings.Contains(out, "retired v1/ConfigMap/"+ns+"/ql3-features: left: changed") || !strings.Contains(out, "ql3-batch: deleted") {
		t.Fatalf("resume --leave-changed:\n%s", out)
	}
	if h := headOf(t, ns); h.Phase != deploy.PhaseCommitted {
		t.Fatalf("head %s", h.Phase)
	}
	mustRun(t, nil, "receipt", "audit", rdir)
}

// SIGKILL while apply waits for a retired object held by a finalizer (the
// ConfigMap, deleted first: reverse inventory order): the Head stays
// applying; once the finalizer is removed, resume counts the ConfigMap as
// done, deletes the Deployment, commits, and the receipts audit.
func TestCLIRetireKillThenResume(t *testing.T) {
	ctx := context.Background()
	ns := controlNamespace(t)
	_, v320, work, rdir := installedForRetire(t, ns)
	cms := cp.Clientset().CoreV1().ConfigMaps(ns)
	cm, err := cms.Get(ctx, "ql3-features", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Finalizers = []string{"qinglong.io/test-hold"}
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	pf := filepath.Join(work, "retire.json")
	mustRun(t, nil, "preflight", v320, "--transition", "retire", "--expected-head", headToken(t, nil, ns), "--out", pf)

	cmd := exec.Command(binary, "apply", "--preflight", pf, "--receipts-dir", rdir, "--timeout", "2m")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cp.AdminKubeconfig)
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Kill once the held ConfigMap is terminating: apply has sent its
	// delete and now waits for it to be gone (an event on the server).
	terminating := func(ctx context.Context) (bool, error) {
		cm, err := cms.Get(ctx, "ql3-features", metav1.GetOptions{})
		return err == nil && cm.DeletionTimestamp != nil, nil
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 60*time.Second, true, terminating); err != nil {
		cmd.Process.Kill()
		t.Fatalf("apply never deleted the held ConfigMap: %v\n%s", err, stderr.String())
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if h := headOf(t, ns); h.Phase != deploy.PhaseApplying {
		t.Fatalf("after SIGKILL the Head is %s", h.Phase)
	}
	cm, err = cms.Get(ctx, "ql3-features", metav1.GetOptions{})
	if err != nil || cm.DeletionTimestamp == nil {
		t.Fatalf("the held ConfigMap should be terminating: %v", err)
	}
	cm.Finalizers = nil
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	out := mustRun(t, nil, "resume", "--preflight", pf, "--receipts-dir", rdir)
	if !strings.Contains(out, "committed: generation 2, retire 3.2.0") || !strings.Contains(out, "ql3-features: already absent") || !strings.Contains(out, "ql3-batch: deleted") {
		t.Fatalf("resume:\n%s", out)
	}
	mustRun(t, nil, "receipt", "audit", rdir)
}

// An object absent at preflight is recorded "already absent" only when the
// API server answers 404 at apply: a read answered 500 or 403 proves
// nothing, so apply stops (exit 4, exit 2), the Head stays applying and
// nothing is recorded; resume, once the read is answered, records it.
func TestCLIRetireAbsentUnreadable(t *testing.T) {
	for _, tt := range []struct {
		code, exit int
	}{{http.StatusInternalServerError, 4}, {http.StatusForbidden, 2}} {
		t.Run(http.StatusText(tt.code), func(t *testing.T) {
			ctx := context.Background()
			ns := controlNamespace(t)
			_, v320, work, rdir := installedForRetire(t, ns)
			if err := cp.Clientset().CoreV1().ConfigMaps(ns).Delete(ctx, "ql3-features", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			pf := filepath.Join(work, "retire.json")
			if out := mustRun(t, nil, "preflight", v320, "--transition", "retire", "--expected-head", headToken(t, nil, ns), "--out", pf); !strings.Contains(out, "ql3-features: absent") {
				t.Fatalf("preflight did not record ql3-features absent:\n%s", out)
			}
			var refused atomic.Int32
			env := proxied(t, ns, func(next http.RoundTripper) http.RoundTripper {
				return roundTripFunc(func(r *http.Request) (*http.Response, error) {
					if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/namespaces/"+ns+"/configmaps/ql3-features") {
						refused.Add(1)
						return refusal(t, r, tt.code), nil
					}
					return next.RoundTrip(r)
				})
			})
			_, stderr, code := run(t, env, "apply", "--preflight", pf, "--receipts-dir", rdir)
			if refused.Load() == 0 {
				t.Fatalf("the read of ql3-features was never answered %d: the test exercised nothing\n%s", tt.code, stderr)
			}
			if code != tt.exit || !strings.Contains(stderr, "ql3-features") || !strings.Contains(stderr, "Head stays applying") {
				t.Fatalf("apply with the absent object's read answered %d: exit %d, want %d naming it\n%s", tt.code, code, tt.exit, stderr)
			}
			if h := headOf(t, ns); h.Phase != deploy.PhaseApplying {
				t.Fatalf("the Head is %s, want applying: an unread object was recorded", h.Phase)
			}
			out := mustRun(t, nil, "resume", "--preflight", pf, "--receipts-dir", rdir)
			if !strings.Contains(out, "retired v1/ConfigMap/"+ns+"/ql3-features: already absent") {
				t.Fatalf("resume:\n%s", out)
			}
			mustRun(t, nil, "receipt", "audit", rdir)
		})
	}
}

// The retired ql3-batch Deployment moves after the preflight. When only its
// status moved — kube-controller-manager's deployment controller recreates
// the ReplicaSet someone deleted and records that in the Deployment's
// status — what the preflight reviewed is unchanged: apply deletes it,
// fenced on its UID and the resourceVersion it re-read. When another
// client changed its spec, apply still exits 3 and deletes nothing.
func TestCLIRetireStatusMoved(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name  string
		move  func(t *testing.T, ns string)
		exit  int
		stays bool
	}{
		{"status by the controller", recreateReplicaSet, 0, false},
		{"spec by another client", func(t *testing.T, ns string) {
			deps := cp.Clientset().AppsV1().Deployments(ns)
			d, err := deps.Get(ctx, "ql3-batch", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			d.Spec.Template.Spec.Containers[0].Args = []string{"--edited"}
			if _, err := deps.Update(ctx, d, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}, 3, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ns := controlNamespace(t)
			_, v320, work, rdir := installedForRetire(t, ns)
			pf := filepath.Join(work, "retire.json")
			mustRun(t, nil, "preflight", v320, "--transition", "retire", "--expected-head", headToken(t, nil, ns), "--out", pf)
			var rec deploy.PreflightRecord
			if data, err := os.ReadFile(pf); err != nil || json.Unmarshal(data, &rec) != nil {
				t.Fatalf("read the preflight record: %v", err)
			}
			recorded := ""
			for _, r := range rec.Retired {
				if r.ID.Name == "ql3-batch" {
					recorded = r.ResourceVersion
				}
			}
			tt.move(t, ns)
			d, err := cp.Clientset().AppsV1().Deployments(ns).Get(ctx, "ql3-batch", metav1.GetOptions{})
			if err != nil || recorded == "" || d.ResourceVersion == recorded {
				t.Fatalf("ql3-batch at resourceVersion %q, recorded %q (%v): it did not move, the test proves nothing", d.ResourceVersion, recorded, err)
			}
			out, stderr, code := run(t, nil, "apply", "--preflight", pf, "--receipts-dir", rdir)
			if code != tt.exit {
				t.Fatalf("apply after ql3-batch's %s moved: exit %d, want %d\n%s\n%s", tt.name, code, tt.exit, out, stderr)
			}
			_, gerr := cp.Clientset().AppsV1().Deployments(ns).Get(ctx, "ql3-batch", metav1.GetOptions{})
			if stays := gerr == nil; stays != tt.stays {
				t.Fatalf("ql3-batch still exists: %v (%v), want %v", stays, gerr, tt.stays)
			}
			if tt.exit != 0 {
				if !strings.Contains(stderr, "resourceVersion "+recorded+" recorded") || !strings.Contains(stderr, "what was reviewed changed") {
					t.Fatalf("the conflict does not name the recorded resourceVersion and the change:\n%s", stderr)
				}
				return
			}
			if !strings.Contains(out, "retired apps/v1/Deployment/"+ns+"/ql3-batch: deleted") {
				t.Fatalf("apply output:\n%s", out)
			}
			deletes, err := cp.Writes(func(e testcluster.AuditEvent) bool {
				return e.Verb == "delete" && e.ObjectRef.Namespace == ns && e.ObjectRef.Name == "ql3-batch" && e.ObjectRef.Resource == "deployments"
			})
			if err != nil || len(deletes) == 0 {
				t.Fatalf("no delete of ql3-batch in the audit log (%v)", err)
			}
			last := deletes[len(deletes)-1]
			if last.ResponseStatus.Code != http.StatusOK || !strings.Contains(string(last.RequestObject), `"uid":"`+string(d.UID)+`"`) || !strings.Contains(string(last.RequestObject), `"resourceVersion":"`+d.ResourceVersion+`"`) {
				t.Fatalf("the delete that removed ql3-batch (%d) was not fenced on its uid and the resourceVersion re-read (%s): %s", last.ResponseStatus.Code, d.ResourceVersion, last.RequestObject)
			}
			mustRun(t, nil, "receipt", "audit", rdir)
		})
	}
}

// recreateReplicaSet deletes ql3-batch's ReplicaSet and waits until the
// deployment controller has made a new one and recorded it in the
// Deployment's status (Progressing: NewReplicaSetAvailable again): the
// Deployment's resourceVersion moved, its spec and metadata did not.
func recreateReplicaSet(t *testing.T, ns string) {
	ctx := context.Background()
	rss := cp.Clientset().AppsV1().ReplicaSets(ns)
	deps := cp.Clientset().AppsV1().Deployments(ns)
	before, err := deps.Get(ctx, "ql3-batch", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	list, err := rss.List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=ql3-batch"})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("ql3-batch's ReplicaSets: %v (%v), want one", list, err)
	}
	old := list.Items[0]
	if err := rss.Delete(ctx, old.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		rs, err := rss.Get(ctx, old.Name, metav1.GetOptions{})
		if err != nil || rs.UID == old.UID {
			return false, nil
		}
		d, err := deps.Get(ctx, "ql3-batch", metav1.GetOptions{})
		if err != nil || d.ResourceVersion == before.ResourceVersion {
			return false, nil
		}
		for _, c := range d.Status.Conditions {
			// The controller records the new ReplicaSet first as
			// NewReplicaSetCreated, then as available: seen after a move,
			// the second update is done.
			if c.Type == "Progressing" && c.Reason == "NewReplicaSetAvailable" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("the deployment controller did not recreate ql3-batch's ReplicaSet and record it: %v", err)
	}
}
