package deploy_test

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/internal/fail"
)

func headWrite(ns, method, phase string) func(*http.Request, []byte) bool {
	return func(r *http.Request, body []byte) bool {
		if r.Method != method || !strings.Contains(r.URL.Path, "/namespaces/"+ns+"/configmaps") {
			return false
		}
		// JSON escapes head.json inside the ConfigMap; protobuf carries it raw.
		return bytes.Contains(body, []byte(`\"phase\":\"`+phase+`\"`)) || bytes.Contains(body, []byte(`"phase":"`+phase+`"`))
	}
}

func objectApply(ns, resource string) func(*http.Request, []byte) bool {
	return func(r *http.Request, _ []byte) bool {
		return r.Method == http.MethodPatch && r.URL.Query().Get("dryRun") == "" &&
			strings.Contains(r.URL.Path, "/namespaces/"+ns+"/"+resource+"/")
	}
}

// A mutation that reaches the server but whose response is lost, at each
// mutation point: the process settles it (by re-reading the Head, or by
// applying the object again) and commits; a rerun is a replay with no
// second generation and a byte-identical receipt, and a deleted receipt is
// rebuilt byte-identical from the Head.
func TestLostResponseAtEveryMutationPoint(t *testing.T) {
	tests := []struct {
		name    string
		upgrade bool // inject during the upgrade (Head update) instead of the install (Head create)
		match   func(ns string) func(*http.Request, []byte) bool
	}{
		{"head create", false, func(ns string) func(*http.Request, []byte) bool { return headWrite(ns, http.MethodPost, "applying") }},
		{"head acquire", true, func(ns string) func(*http.Request, []byte) bool { return headWrite(ns, http.MethodPut, "applying") }},
		{"object apply", false, func(ns string) func(*http.Request, []byte) bool { return objectApply(ns, "deployments") }},
		{"head commit on install", false, func(ns string) func(*http.Request, []byte) bool { return headWrite(ns, http.MethodPut, "committed") }},
		{"head commit on upgrade", true, func(ns string) func(*http.Request, []byte) bool { return headWrite(ns, http.MethodPut, "committed") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := targetNamespace(t)
			v300 := release(t, "v3.0.0", ns, "")
			v310 := release(t, "v3.1.0", ns, "")
			rdir := t.TempDir()
			clean := options(t, cluster(t, userConfig(t, "clean", "system:masters")), rdir)
			dir, kind, exp, gen := v300, deploy.TransitionInstall, deploy.ExpectedHead{}, int64(1)
			if tt.upgrade {
				deployRelease(t, clean, v300, deploy.TransitionInstall, deploy.ExpectedHead{})
				dir, kind, exp, gen = v310, deploy.TransitionUpgrade, headOf(t, ns).Expected(), 2
			}
			pf := preflight(t, clean, dir, kind, exp)

			cfg, drop := withDrop(userConfig(t, "faulty", "system:masters"), tt.match(ns))
			faulty := options(t, cluster(t, cfg), rdir)
			first, err := deploy.RunApply(context.Background(), faulty, deploy.ApplyRequest{Preflight: pf.Record})
			if drop.fired.Load() == 0 {
				t.Fatal("the fault never fired: the test exercised nothing")
			}
			// One answer is lost, once: the process settles it by reading
			// (a Head write) or by applying again (server-side apply), so
			// the outcome is known: committed, by the faulty run itself.
			if err != nil {
				t.Fatalf("apply with a lost response: %v (class %v), want committed: a lost answer is settled by reading again", err, fail.ClassOf(err))
			}
			h := headOf(t, ns)
			if first.Outcome != "committed" || first.ReceiptState != "written" || h.Phase != deploy.PhaseCommitted ||
				h.Generation != gen || h.Transition.PreflightDigest != pf.Record.SelfDigest {
				t.Fatalf("apply said %+v; head is generation %d %s (preflight %s), want generation %d committed with %s", first, h.Generation, h.Phase, h.Transition.PreflightDigest, gen, pf.Record.SelfDigest)
			}
			entries, _ := os.ReadDir(rdir)
			if len(entries) != int(gen) {
				t.Fatalf("receipts dir holds %d files, want %d", len(entries), gen)
			}
			want := readBytes(t, first.Receipt)
			// Rerunning the very same command is a pure replay: no second
			// generation, the same receipt bytes, nothing written.
			again, err := deploy.RunApply(context.Background(), clean, deploy.ApplyRequest{Preflight: pf.Record})
			if err != nil || again.Outcome != "replayed" || again.ReceiptState != "replayed" || !bytes.Equal(readBytes(t, again.Receipt), want) {
				t.Fatalf("replay: %+v, %v", again, err)
			}
			if h := headOf(t, ns); h.Generation != gen || h.Phase != deploy.PhaseCommitted {
				t.Fatalf("after replay: generation %d %s, want generation %d committed", h.Generation, h.Phase, gen)
			}
			// Deleting the receipt and rerunning rebuilds identical bytes from the Head.
			if err := os.Remove(again.Receipt); err != nil {
				t.Fatal(err)
			}
			rebuilt, err := deploy.RunApply(context.Background(), clean, deploy.ApplyRequest{Preflight: pf.Record})
			if err != nil || rebuilt.ReceiptState != "rebuilt" || !bytes.Equal(readBytes(t, rebuilt.Receipt), want) {
				t.Fatalf("rebuild: %+v, %v", rebuilt, err)
			}
		})
	}
}

func readBytes(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// Every tamper class of docs/ceremony.md §4.2 is refused with "tamper", and the
// Head is left exactly as the tamperer left it: never repaired.
func TestHeadTamperClasses(t *testing.T) {
	ns := targetNamespace(t)
	v300 := release(t, "v3.0.0", ns, "")
	v310 := release(t, "v3.1.0", ns, "")
	o := options(t, cluster(t, userConfig(t, "tamper-test", "system:masters")), t.TempDir())
	deployRelease(t, o, v300, deploy.TransitionInstall, deploy.ExpectedHead{})
	good := headOf(t, ns)
	pf := preflight(t, o, v310, deploy.TransitionUpgrade, good.Expected())
	cms := cp.Clientset().CoreV1().ConfigMaps(ns)
	ctx := context.Background()
	original, err := cms.Get(ctx, deploy.HeadName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	headJSON := original.Data[deploy.HeadKey]
	// An owner that exists, or the garbage collector deletes the Head.
	owner, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name   string
		mutate func(cm *corev1.ConfigMap)
	}{
		{"extra data key", func(cm *corev1.ConfigMap) { cm.Data["extra"] = "x" }},
		{"binaryData", func(cm *corev1.ConfigMap) { cm.BinaryData = map[string][]byte{"b": {1}} }},
		{"finalizer", func(cm *corev1.ConfigMap) { cm.Finalizers = []string{"example.com/hold"} }},
		{"owner reference", func(cm *corev1.ConfigMap) {
			cm.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}}
		}},
		{"label changed", func(cm *corev1.ConfigMap) { cm.Labels[deploy.LabelHeadSchema] = "v0" }},
		{"extra label", func(cm *corev1.ConfigMap) { cm.Labels["team"] = "x" }},
		{"extra annotation", func(cm *corev1.ConfigMap) { cm.Annotations["note"] = "x" }},
		{"annotation digest mismatch", func(cm *corev1.ConfigMap) {
			cm.Annotations[deploy.AnnotationSelfDigest] = "sha256:" + strings.Repeat("a", 64)
		}},
		{"non-canonical json", func(cm *corev1.ConfigMap) { cm.Data[deploy.HeadKey] = " " + headJSON }},
		{"unknown field", func(cm *corev1.ConfigMap) {
			cm.Data[deploy.HeadKey] = strings.Replace(headJSON, `{"current"`, `{"comment":"x","current"`, 1)
		}},
		{"content edited", func(cm *corev1.ConfigMap) {
			cm.Data[deploy.HeadKey] = strings.Replace(headJSON, `"version":"3.0.0"`, `"version":"3.0.1"`, 1)
		}},
		{"key renamed", func(cm *corev1.ConfigMap) {
			cm.Data = map[string]string{"head.yaml": headJSON}
		}},
		{"oversize", func(cm *corev1.ConfigMap) {
			cm.Data[deploy.HeadKey] = headJSON + strings.Repeat(" ", deploy.HeadMaxBytes)
		}},
		// A Head of another cluster, every digest recomputed: only the
		// comparison with the cluster it was read from catches it.
		{"another cluster's Head, resealed", func(cm *corev1.ConfigMap) {
			h, err := deploy.ParseHeadConfigMap(original)
			if err != nil {
				t.Fatal(err)
			}
			h.Target.ClusterIdentity = "sha256:" + strings.Repeat("b", 64)
			if err := h.Seal(); err != nil {
				t.Fatal(err)
			}
			other, err := h.ConfigMap(ns)
			if err != nil {
				t.Fatal(err)
			}
			cm.Data, cm.Annotations, cm.Labels = other.Data, other.Annotations, other.Labels
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cur, err := cms.Get(ctx, deploy.HeadName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			tampered := cur.DeepCopy()
			tampered.Labels, tampered.Annotations, tampered.Data = copyMap(original.Labels), copyMap(original.Annotations), copyMap(original.Data)
			tampered.Finalizers, tampered.OwnerReferences, tampered.BinaryData = nil, nil, nil
			tt.mutate(tampered)
			written, err := cms.Update(ctx, tampered, metav1.UpdateOptions{})
			if err != nil {
				t.Fatalf("tamper: %v", err)
			}
			_, err = deploy.RunApply(ctx, o, deploy.ApplyRequest{Preflight: pf.Record})
			if !fail.Is(err, fail.Tamper) {
				t.Fatalf("apply on a tampered Head: %v (class %v), want tamper", err, fail.ClassOf(err))
			}
			_, err = deploy.RunPreflight(ctx, o, deploy.PreflightRequest{Dir: v310, Transition: "upgrade", Expected: good.Expected(), Out: filepath.Join(t.TempDir(), "pf.json")})
			if !fail.Is(err, fail.Tamper) {
				t.Fatalf("preflight on a tampered Head: %v, want tamper", err)
			}
			after, err := cms.Get(ctx, deploy.HeadName, metav1.GetOptions{})
			if err != nil || after.ResourceVersion != written.ResourceVersion {
				t.Fatalf("the tampered Head was touched (rv %s -> %s): %v", written.ResourceVersion, after.ResourceVersion, err)
			}
		})
	}
	// Restore the genuine Head: the ceremony continues from it.
	cur, _ := cms.Get(ctx, deploy.HeadName, metav1.GetOptions{})
	restored := original.DeepCopy()
	restored.ResourceVersion = cur.ResourceVersion
	if _, err := cms.Update(ctx, restored, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := deploy.RunApply(ctx, o, deploy.ApplyRequest{Preflight: pf.Record}); err != nil {
		t.Fatalf("apply after restoring the genuine Head: %v", err)
	}
}

func copyMap[V any](m map[string]V) map[string]V {
	out := make(map[string]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// notServedYet is the real cluster, except that the kind Widget is not yet
// served for the first misses applies of it (or for ever when misses < 0):
// what a kube-apiserver that has just restarted answers while it rebuilds
// discovery and its CRD handlers from storage.
type notServedYet struct {
	deploy.Cluster
	mu     sync.Mutex
	misses int
	resets int
}

func (c *notServedYet) Apply(ctx context.Context, u *unstructured.Unstructured, fm string, force, dryRun bool) (*unstructured.Unstructured, error) {
	if u.GetKind() == "Widget" && !dryRun {
		c.mu.Lock()
		miss := c.misses != 0
		if c.misses > 0 {
			c.misses--
		}
		c.mu.Unlock()
		if miss {
			return nil, &meta.NoKindMatchError{GroupKind: u.GroupVersionKind().GroupKind(), SearchedVersions: []string{u.GroupVersionKind().Version}}
		}
	}
	return c.Cluster.Apply(ctx, u, fm, force, dryRun)
}

func (c *notServedYet) ResetMapper() {
	c.mu.Lock()
	c.resets++
	c.mu.Unlock()
	c.Cluster.ResetMapper()
}

// A kind of the release's own CRD that the API server does not serve yet is
// waited for (discovery read again) instead of failing the apply as invalid;
// if it never comes, apply fails as unavailable (exit 4) and a rerun settles.
func TestCRDKindNotYetServed(t *testing.T) {
	ns := targetNamespace(t)
	dir := release(t, "v3.0.0", ns, "")
	cl := &notServedYet{Cluster: cluster(t, userConfig(t, "alice", "system:masters")), misses: 3}
	o := options(t, cl, t.TempDir())
	res := deployRelease(t, o, dir, deploy.TransitionInstall, deploy.ExpectedHead{})
	if res.Outcome != "committed" || cl.misses != 0 || cl.resets < 3 {
		t.Fatalf("outcome %q, %d misses left, %d discovery resets", res.Outcome, cl.misses, cl.resets)
	}

	ns2 := targetNamespace(t)
	dir2 := release(t, "v3.0.0", ns2, "")
	never := &notServedYet{Cluster: cluster(t, userConfig(t, "alice", "system:masters")), misses: -1}
	o2 := options(t, never, t.TempDir())
	o2.Timeout = 2 * time.Second
	pf := preflight(t, o2, dir2, deploy.TransitionInstall, deploy.ExpectedHead{})
	_, err := deploy.RunApply(context.Background(), o2, deploy.ApplyRequest{Preflight: pf.Record})
	if !fail.Is(err, fail.Unavailable) || !strings.Contains(err.Error(), "not served") {
		t.Fatalf("apply with the kind never served: %v (class %v), want unavailable", err, fail.ClassOf(err))
	}
	if h := headOf(t, ns2); h.Phase != deploy.PhaseApplying {
		t.Fatalf("Head after the unavailable apply: %+v", h)
	}
	// The kind is served again: resume takes the transition over and commits.
	o3 := options(t, cluster(t, userConfig(t, "alice", "system:masters")), o2.ReceiptsDir)
	res3, err := deploy.RunApply(context.Background(), o3, deploy.ApplyRequest{Preflight: pf.Record, Resume: true})
	if err != nil || res3.Outcome == "" {
		t.Fatalf("rerun: %+v %v", res3, err)
	}
	if h := headOf(t, ns2); h.Phase != deploy.PhaseCommitted {
		t.Fatalf("Head after the rerun: %+v", h)
	}
}
