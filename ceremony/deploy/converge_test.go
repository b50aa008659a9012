package deploy_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/testcluster"
	"github.com/qinglong/kubectl-ql3/inventory"
)

// manyRelease writes a release with enough objects of one kind in one
// namespace for the convergence read to LIST them: configMaps ConfigMaps,
// and the four role Deployments.
func manyRelease(t *testing.T, ns string, configMaps int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "many")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for i := range configMaps {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%03d\ndata:\n  k: v%d\n", i, i)
	}
	for _, role := range []string{"control", "control-ai", "admin", "worker"} {
		fmt.Fprintf(&b, `---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
  labels:
    qinglong.io/role: %[1]s
spec:
  replicas: 0
  selector:
    matchLabels:
      app: %[1]s
  template:
    metadata:
      labels:
        app: %[1]s
    spec:
      containers:
      - name: app
        image: registry.k8s.io/pause:3.10@sha256:ee6521f290b2168b6e0935a181d4cff9be1ac3f505666ef0e3c98fae8199917a
`, role)
	}
	files := map[string]string{
		"objects.yaml":       b.String(),
		"kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: " + ns + "\nresources:\n- objects.yaml\n",
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	lockRelease(t, dir, "1.0.0")
	return dir
}

// progress records the ceremony's progress lines (and logs them).
type progress struct {
	t  *testing.T
	mu sync.Mutex
	b  bytes.Buffer
}

func (p *progress) Write(data []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.t.Log(strings.TrimRight(string(data), "\n"))
	return p.b.Write(data)
}

func (p *progress) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.b.String()
}

var readBack = regexp.MustCompile(`converge: read back in \d+ poll\(s\) with (\d+) LIST and (\d+) GET request\(s\)`)

// The convergence read LISTs a kind in a namespace that holds many of the
// release's objects, and reads the few others by name.
func TestConvergeReadsManyObjectsWithList(t *testing.T) {
	ns := targetNamespace(t)
	dir := manyRelease(t, ns, 30)
	pr := &progress{t: t}
	o := options(t, cluster(t, userConfig(t, "lister", "system:masters")), t.TempDir())
	o.Progress = pr
	deployRelease(t, o, dir, deploy.TransitionInstall, deploy.ExpectedHead{})
	m := readBack.FindStringSubmatch(pr.String())
	if m == nil || m[1] == "0" {
		t.Fatalf("the 30 ConfigMaps were not read back with a LIST:\n%s", pr)
	}
	if h := headOf(t, ns); h.Phase != deploy.PhaseCommitted || h.Steps.Converge == "" {
		t.Fatalf("head after install: %+v", h)
	}
}

// With the least privilege `kubectl ql3 rbac` prints (no list), the LIST
// is refused once per kind and namespace and the objects are read by name:
// the deploy still converges and commits.
func TestConvergeWithoutListFallsBackToGet(t *testing.T) {
	ns := targetNamespace(t)
	dir := manyRelease(t, ns, 30)
	rel, err := inventory.Render(filesys.MakeFsOnDisk(), dir, inventory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	user := "nolist-" + ns
	objs, err := deploy.RBAC(rel.Objects, ns, cluster(t, cp.RESTConfig()).Mapper(), deploy.RBACSubject{User: user})
	if err != nil {
		t.Fatal(err)
	}
	// The release's ConfigMaps live in the control namespace: its Role
	// grants `create configmaps` (Head and release alike) once.
	for _, obj := range objs {
		if r, ok := obj.(*rbacv1.Role); ok {
			for i := range r.Rules {
				for j := range i {
					if fmt.Sprint(r.Rules[i]) == fmt.Sprint(r.Rules[j]) {
						t.Fatalf("Role %s/%s grants %v twice", r.Namespace, r.Name, r.Rules[i])
					}
				}
			}
		}
	}
	cp.GrantAll(t, objs)
	pr := &progress{t: t}
	o := options(t, cluster(t, userConfig(t, user)), t.TempDir())
	o.Progress = pr
	deployRelease(t, o, dir, deploy.TransitionInstall, deploy.ExpectedHead{})
	out := pr.String()
	if !strings.Contains(out, "converge: LIST of v1 ConfigMap in "+ns+": forbidden") {
		t.Fatalf("no forbidden LIST fallback reported:\n%s", out)
	}
	m := readBack.FindStringSubmatch(out)
	if m == nil || m[2] == "0" {
		t.Fatalf("objects were not read back by name:\n%s", out)
	}
	if h := headOf(t, ns); h.Phase != deploy.PhaseCommitted {
		t.Fatalf("head after install: %+v", h)
	}
}

// forbidGet is the real cluster, except that reading back objects of one
// kind is forbidden: a permission withdrawn between apply and converge.
type forbidGet struct {
	deploy.Cluster
	kind string
}

func (c forbidGet) Get(ctx context.Context, id inventory.Identity) (*unstructured.Unstructured, error) {
	if id.Kind == c.kind {
		return nil, apierrors.NewForbidden(schema.GroupResource{Resource: strings.ToLower(c.kind) + "s"}, id.Name, errors.New("get withdrawn by the test"))
	}
	return c.Cluster.Get(ctx, id)
}

// A read-back the deployer may not make fails at once as invalid input
// (exit 2), naming the objects, instead of waiting out --timeout as if the
// objects were slow to become ready; the Head stays applying for resume.
func TestConvergeForbiddenFailsFast(t *testing.T) {
	ns := targetNamespace(t)
	dir := manyRelease(t, ns, 3)
	o := options(t, forbidGet{Cluster: cluster(t, userConfig(t, "alice", "system:masters")), kind: "ConfigMap"}, t.TempDir())
	o.Timeout = time.Minute
	pf := preflight(t, o, dir, deploy.TransitionInstall, deploy.ExpectedHead{})
	_, err := deploy.RunApply(context.Background(), o, deploy.ApplyRequest{Preflight: pf.Record})
	if !fail.Is(err, fail.Invalid) || !strings.Contains(err.Error(), "cannot be read back") || !strings.Contains(err.Error(), "get withdrawn by the test") {
		t.Fatalf("apply: %v (class %v), want invalid naming the forbidden read", err, fail.ClassOf(err))
	}
	if h := headOf(t, ns); h.Phase != deploy.PhaseApplying {
		t.Fatalf("Head: %+v, want applying", h)
	}
}

// forbidPodList is the real cluster, except that listing pods is
// forbidden: a grant withdrawn after the access check.
type forbidPodList struct{ deploy.Cluster }

func (c forbidPodList) ListPage(ctx context.Context, gvk schema.GroupVersionKind, ns string, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	if gvk.Kind == "Pod" {
		return nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("list withdrawn by the test"))
	}
	return c.Cluster.ListPage(ctx, gvk, ns, opts)
}

// A rollout whose pods may not be read is still reported, as what it is:
// converge says that listing the pods was forbidden, and the outcome is
// the timeout's (exit 4), not a failure of the ceremony. The test cluster
// has no node, so a Deployment of one replica never becomes Available.
func TestConvergeSaysWhenPodsCannotBeRead(t *testing.T) {
	ns := targetNamespace(t)
	dir := release(t, "v3.0.0", ns, "")
	editReleaseFile(t, dir, "worker.yaml", "3.0.0", func(w string) string { return strings.Replace(w, "replicas: 0", "replicas: 1", 1) })
	o := options(t, forbidPodList{cluster(t, userConfig(t, "alice", "system:masters"))}, t.TempDir())
	o.Timeout = 3 * time.Second
	pf := preflight(t, o, dir, deploy.TransitionInstall, deploy.ExpectedHead{})
	_, err := deploy.RunApply(context.Background(), o, deploy.ApplyRequest{Preflight: pf.Record})
	if !fail.Is(err, fail.Unavailable) || !strings.Contains(err.Error(), "list pods in namespace "+ns+" is forbidden") || !strings.Contains(err.Error(), "/Deployment/"+ns+"/ql3-worker") {
		t.Fatalf("apply: %v (class %v), want unavailable saying the pods of ql3-worker could not be listed", err, fail.ClassOf(err))
	}
}

// onLine is a progress writer that closes seen when a line containing want
// is written.
type onLine struct {
	t    *testing.T
	want string
	once sync.Once
	seen chan struct{}
}

func (w *onLine) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	if strings.Contains(string(p), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

// With the roles `kubectl ql3 rbac` prints, converge watches, by name, the
// workload it waits for and reads it again as soon as it changes. The
// pause between polls is made an hour, so the apply can only finish
// because the watch woke the poll: ql3-worker (one replica: the test
// cluster has no node, so it never becomes Available) is scaled to zero
// by another client once converge says it watches (a change made before
// the watch is established is still seen: the watch starts at the
// resourceVersion of the last read). The audit log shows the deployer's
// watch of exactly that Deployment, answered, and no request of the
// deployer refused. Without the watch rule the deployer never tries one:
// the timer alone paces the polls, and the scale comes once the release is
// applied.
func TestConvergeWatchWakesThePoll(t *testing.T) {
	for _, tc := range []struct {
		name  string
		watch bool
		after string // the progress line the scale waits for
	}{{"printed roles", true, "converge: watching"}, {"roles without watch", false, "server-side applied"}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ns := targetNamespace(t)
			dir := release(t, "v3.0.0", ns, "")
			editReleaseFile(t, dir, "worker.yaml", "3.0.0", func(w string) string { return strings.Replace(w, "replicas: 0", "replicas: 1", 1) })
			rel, err := inventory.Render(filesys.MakeFsOnDisk(), dir, inventory.Options{})
			if err != nil {
				t.Fatal(err)
			}
			user := "watcher-" + ns
			objs, err := deploy.RBAC(rel.Objects, ns, cluster(t, cp.RESTConfig()).Mapper(), deploy.RBACSubject{User: user})
			if err != nil {
				t.Fatal(err)
			}
			isWatch := func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Resources, "deployments") }
			if !tc.watch && testcluster.DropVerb(objs, "watch", isWatch) != 1 {
				t.Fatal("the printed roles grant no watch on the release's Deployments")
			}
			cp.GrantAll(t, objs)
			pw := &onLine{t: t, want: tc.after, seen: make(chan struct{})}
			o := options(t, cluster(t, userConfig(t, user)), t.TempDir())
			o.Progress, o.Timeout = pw, time.Minute
			if tc.watch {
				o.SetPollPause(time.Hour)
			}
			pf := preflight(t, o, dir, deploy.TransitionInstall, deploy.ExpectedHead{})
			applied, scaled := make(chan struct{}), make(chan error, 1)
			go func() {
				select {
				case <-pw.seen:
				case <-applied:
					scaled <- errors.New("the apply ended before the line the scale waits for")
					return
				}
				_, err := cp.Clientset().AppsV1().Deployments(ns).Patch(context.Background(), "ql3-worker", types.MergePatchType,
					[]byte(`{"spec":{"replicas":0}}`), metav1.PatchOptions{FieldManager: "scaler"})
				scaled <- err
			}()
			_, err = deploy.RunApply(context.Background(), o, deploy.ApplyRequest{Preflight: pf.Record})
			close(applied)
			if serr := <-scaled; serr != nil {
				t.Errorf("scale ql3-worker to 0: %v", serr)
			}
			if err != nil {
				t.Fatalf("apply: %v", err)
			}
			events, err := cp.Events(func(e testcluster.AuditEvent) bool { return e.User.Username == user })
			if err != nil {
				t.Fatal(err)
			}
			var watches []string
			for _, e := range events {
				if e.ResponseStatus.Code == 403 {
					t.Errorf("the deployer was refused: %s %s", e.Verb, e.RequestURI)
				}
				if e.Verb == "watch" && e.Stage == "ResponseStarted" {
					watches = append(watches, fmt.Sprintf("%s %s/%s %d", e.ObjectRef.Resource, e.ObjectRef.Namespace, e.ObjectRef.Name, e.ResponseStatus.Code))
				}
			}
			worker := "deployments " + ns + "/ql3-worker 200"
			switch {
			case tc.watch && !slices.Contains(watches, worker):
				t.Fatalf("the deployer's watches: %q, want one of ql3-worker by name, answered", watches)
			case !tc.watch && len(watches) > 0:
				t.Fatalf("the deployer, not granted watch, tried: %q", watches)
			}
			for _, w := range watches {
				if !strings.HasPrefix(w, "deployments "+ns+"/ql3-") || !strings.HasSuffix(w, " 200") {
					t.Errorf("a watch not of one of the release's Deployments by name: %s", w)
				}
			}
		})
	}
}
