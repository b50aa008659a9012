package worker

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/qinglong/kubectl-ql3/ceremony/worker/delivery"
	"github.com/qinglong/kubectl-ql3/ceremony/worker/workertest"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/testcluster"
)

// Publish with a wait needs list on ReplicaSets and on pods in the
// Worker's namespace: the printed least privilege less either one fails
// closed (exit 2 naming it) before any write. With both, a wait on this
// cluster (no node: the pod is never scheduled) ends unavailable (exit 4)
// after the writes, naming the pod's state — and the user only listed,
// never watched.
func TestWaitLeastPrivilege(t *testing.T) {
	for _, res := range []string{"replicasets", "pods", ""} {
		name := res
		if name == "" {
			name = "all"
		}
		t.Run(name, func(t *testing.T) {
			ns, stageNS := cp.Namespace(t), cp.Namespace(t)
			workertest.Create(t, cp.Clientset(), ns)
			user := "rotator-wait-" + name
			grantWithout(t, ns, stageNS, user, res)
			o := options(t, cp.User(t, user), ns, stageNS)
			o.Wait = 8 * time.Second
			d := newDelivery(t, ns, "d-a", "cred-a", nil, 1)
			if _, err := Stage(context.Background(), o, d, token("A")); err != nil {
				t.Fatal(err)
			}
			_, err := Publish(context.Background(), o, d)
			if res != "" {
				if !fail.Is(err, fail.Invalid) || !strings.Contains(err.Error(), "list "+res) {
					t.Fatalf("publish --wait without list on %s: %v; want invalid naming it", res, err)
				}
				cp.NoWrites(t, user, ns, "secrets")
				cp.NoWrites(t, user, ns, "deployments")
				return
			}
			if !fail.Is(err, fail.Unavailable) || !strings.Contains(err.Error(), "both written and read back") || !strings.Contains(err.Error(), "not yet scheduled") {
				t.Fatalf("publish --wait with no node: %v; want unavailable naming the unscheduled pod", err)
			}
			t.Logf("the timed-out wait: %v", err)
			if got := getDep(t, ns).Spec.Template.Annotations[delivery.AnnotationDeliveryID]; got != "d-a" {
				t.Fatalf("the Deployment carries delivery %q after the wait timed out", got)
			}
			listed := map[string]bool{}
			reads, err := cp.Reads(func(e testcluster.AuditEvent) bool { return e.User.Username == user && e.ObjectRef.Namespace == ns })
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range reads {
				if e.Verb == "watch" {
					t.Fatalf("the wait watched: %+v", e)
				}
				listed[e.Verb+" "+e.ObjectRef.Resource] = true
			}
			if !listed["list replicasets"] || !listed["list pods"] {
				t.Fatalf("audit log: the user's reads in %s: %v; want its lists of replicasets and pods", ns, listed)
			}
		})
	}
}

// grantWithout grants user the printed least privilege, less every rule
// on resource ("" keeps them all).
func grantWithout(t *testing.T, ns, stageNS, user, resource string) {
	t.Helper()
	objs, err := RBAC(ns, stageNS, depName, Subject{User: user})
	if err != nil {
		t.Fatal(err)
	}
	role := objs[0].(*rbacv1.Role)
	n := len(role.Rules)
	role.Rules = slices.DeleteFunc(role.Rules, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Resources, resource) })
	if resource != "" && len(role.Rules) != n-1 {
		t.Fatalf("the Role in the Worker's namespace has %d rules on %s, want 1", n-len(role.Rules), resource)
	}
	cp.GrantPrinted(t, objs, "-"+ns)
}
