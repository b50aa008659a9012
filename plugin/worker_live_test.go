package plugin_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/qinglong/kubectl-ql3/inventory"
)

// `worker audit --deployment NAME -n NS` reads the live Deployment and the
// claim it names from a real API server: the reviewed deployable release,
// deployed, has no findings; a second replica, set on the cluster, is a
// single-replica finding (exit 2); a claim name that does not exist is a
// state-pvc finding; a missing Deployment is an error naming it.
func TestWorkerAuditLive(t *testing.T) {
	ns := cp.Namespace(t)
	ctx := context.Background()
	admin := cp.Clientset()
	rel, err := inventory.Render(filesys.MakeFsOnDisk(), "../ceremony/worker/audit/testdata/deployable", inventory.Options{AllowSecretData: true})
	if err != nil {
		t.Fatal(err)
	}
	var dep *appsv1.Deployment
	for _, u := range rel.Objects {
		switch u.GetKind() {
		case "Deployment":
			dep = &appsv1.Deployment{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, dep); err != nil {
				t.Fatal(err)
			}
			dep.Namespace = ns
			if dep, err = admin.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		case "PersistentVolumeClaim":
			pvc := &corev1.PersistentVolumeClaim{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, pvc); err != nil {
				t.Fatal(err)
			}
			pvc.Namespace = ns
			if _, err := admin.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if dep == nil {
		t.Fatal("the deployable fixture renders no Deployment")
	}
	audit := func(wantCode int) map[string]bool {
		t.Helper()
		out, stderr, code := wkRun(t, binary, nil, nil, "worker", "audit", "-n", ns, "--deployment", dep.Name, "-o", "json")
		if code != wantCode {
			t.Fatalf("worker audit: exit %d, want %d\n%s%s", code, wantCode, out, stderr)
		}
		var rep struct {
			Mode     string `json:"mode"`
			Findings []struct {
				Rule string `json:"rule"`
			} `json:"findings"`
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.Mode != "live" {
			t.Fatalf("worker audit -o json: mode %q, %v\n%s", rep.Mode, err, out)
		}
		rules := map[string]bool{}
		for _, f := range rep.Findings {
			rules[f.Rule] = true
		}
		return rules
	}
	if rules := audit(0); len(rules) != 0 {
		t.Fatalf("the deployed reviewed release: findings %v", rules)
	}

	// Edits on the cluster, as another operator would make them (the
	// controller writes the status meanwhile: retry on conflict).
	edit := func(f func(*appsv1.Deployment)) {
		t.Helper()
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			d, err := admin.AppsV1().Deployments(ns).Get(ctx, dep.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			f(d)
			_, err = admin.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	two := int32(2)
	edit(func(d *appsv1.Deployment) { d.Spec.Replicas = &two })
	if rules := audit(2); !rules["single-replica"] || len(rules) != 1 {
		t.Fatalf("two replicas on the cluster: findings %v, want single-replica only", rules)
	}

	edit(func(d *appsv1.Deployment) {
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.PersistentVolumeClaim != nil {
				v.PersistentVolumeClaim.ClaimName = "ql3-worker-state-elsewhere"
			}
		}
	})
	if rules := audit(2); !rules["state-pvc"] || !rules["single-replica"] || len(rules) != 2 {
		t.Fatalf("the Deployment names a claim that does not exist: findings %v, want state-pvc and single-replica", rules)
	}

	if _, stderr, code := wkRun(t, binary, nil, nil, "worker", "audit", "-n", ns, "--deployment", "absent"); code != 2 || !strings.Contains(stderr, "absent") {
		t.Fatalf("absent Deployment: exit %d\n%s", code, stderr)
	}
}
