package deploy_test

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/qinglong/kubectl-ql3/ceremony/approval/gate"
	"github.com/qinglong/kubectl-ql3/ceremony/approval/gate/gatetest"
	"github.com/qinglong/kubectl-ql3/ceremony/approval/record"
	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/ceremony/deploy/deploytest"
	"github.com/qinglong/kubectl-ql3/ceremony/views"
	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// An approval forged while the approval policy was off does not attest a
// Head written after it is back. Mallory holds exactly the printed
// deployer and proposer roles; while an admin has the approval policy's
// binding deleted she replaces the approval object with one already
// approved in bob's name; with the binding restored (and its window over)
// she writes the Head raw naming it — the Head policy admits that, as the
// object is what the Head says. status and history -n must flag it (exit
// 5): the object's creationTimestamp, which the API server set, falls in
// the gap. Before, both said "approved by bob" and exited 0.
func TestApprovalForgedInAPolicyGapIsFlagged(t *testing.T) {
	p, h1, mallory := underTheRule(t, "mallory")
	madeUp := deploytest.Next(t, h1, "3.0.1")
	ctx := context.Background()
	adm := cp.Clientset().AdmissionregistrationV1()
	if err := adm.ValidatingAdmissionPolicyBindings().Delete(ctx, gate.PolicyName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := mallory.CoreV1().ConfigMaps(p.ns).Delete(ctx, record.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("the proposer role deletes the approval object: %v", err)
	}
	forged := gate.ConfigMap(p.ns, record.Approval{PreflightDigest: madeUp.Transition.PreflightDigest, CommandDigest: madeUp.Transition.CommandDigest,
		ExpectedHead: h1.Expected().String(), Proposer: "mallory", Decision: record.Pending}.Decided(record.Approved, "bob", "forged"))
	var last error
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		created, err := mallory.CoreV1().ConfigMaps(p.ns).Create(ctx, forged, metav1.CreateOptions{})
		if err == nil {
			forged = created
		}
		last = err
		return err == nil, nil
	}); err != nil {
		t.Fatalf("the forged approval was never accepted with the binding deleted: %v", last)
	}
	gatetest.Install(t, cp.Clientset(), p.ns) // restored as printed, enforced, its window over
	madeUp.Approval = &deploy.HeadApproval{Proposer: "mallory", Approver: "bob", UID: string(forged.UID), ResourceVersion: forged.ResourceVersion}
	if err := rawHeadWrite(t, mallory, p.ns, madeUp); err != nil {
		t.Fatalf("the Head naming the forged approval, with the policies back: %v (the Head policy admits it: the object is as the Head says)", err)
	}
	want := "that object was created at " + forged.CreationTimestamp.UTC().Format(time.RFC3339) + ", not 5s after the approval policies last changed"
	flaggedBoth(t, p, want)
}

// A managedFields time is what the client sent, except the writer's own
// entry's. Mallory, with the Head policy's binding deleted, writes the
// Head naming a made-up approval and sends with it a managedFields entry
// of another manager stamped 2099, owning a label; the API server keeps
// it. With the binding back, status and history -n must still flag the
// claim as written in the gap: head.json's owner's time, which the API
// server set, says when it changed. Before, the latest time of any entry
// was taken, and the forged one made the Head read as attested.
func TestForgedManagedFieldsTimeDoesNotAttestTheHead(t *testing.T) {
	p, h1, mallory := underTheRule(t, "mallory")
	madeUp := deploytest.Next(t, h1, "3.0.1")
	madeUp.Approval = &deploy.HeadApproval{Proposer: "alice", Approver: "bob", UID: "6c0a1e55-0000-4000-8000-000000000000", ResourceVersion: "1"}
	if err := madeUp.Seal(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	future := metav1.NewTime(time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC))
	withoutHeadBinding(t, p.ns, func() {
		cm, err := madeUp.ConfigMap(p.ns)
		if err != nil {
			t.Fatal(err)
		}
		cur, err := mallory.CoreV1().ConfigMaps(p.ns).Get(ctx, deploy.HeadName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.ResourceVersion = cur.ResourceVersion
		cm.ManagedFields = append(cur.ManagedFields, metav1.ManagedFieldsEntry{Manager: "x", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &future,
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{"f:app.kubernetes.io/managed-by":{}}}}`)}})
		if _, err := mallory.CoreV1().ConfigMaps(p.ns).Update(ctx, cm, metav1.UpdateOptions{FieldManager: deploy.HeadFieldManager}); err != nil {
			t.Fatalf("the raw write without the Head binding: %v", err)
		}
	})
	live, err := cp.Clientset().CoreV1().ConfigMaps(p.ns).Get(ctx, deploy.HeadName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if last, _ := gate.LastWrite(live); !last.Equal(future.Time) {
		t.Fatalf("the API server did not keep the forged time: the latest managedFields time is %s", last)
	}
	want := "so the Head policy may not have checked that claim"
	flaggedBoth(t, p, want)
}

// flaggedBoth requires status and history -n of p's namespace to report
// want as evidence of a bypass (exit 5, the chain failed).
func flaggedBoth(t *testing.T, p *twoPerson, want string) {
	t.Helper()
	ctx := context.Background()
	st, err := views.Status(ctx, p.alice.Cluster, p.ns, 0, nil)
	if err != nil || !strings.Contains(strings.Join(st.Bypass, "\n"), want) || st.Err() == nil {
		t.Fatalf("status: bypass %q, %v; want a finding %q and exit 5", st.Bypass, err, want)
	}
	rep, err := views.HistoryAtHead(ctx, p.alice.Cluster, p.alice.ReceiptsDir, p.ns)
	if err != nil || rep.Err() == nil || !strings.Contains(strings.Join(rep.Chain.Reasons, "\n"), want) {
		t.Fatalf("history -n: %+v, %v; want the chain to fail with %q", rep.Chain, err, want)
	}
}

// Not being allowed to read the approval policies is not evidence that
// they are missing. Dora holds exactly the printed deployer and proposer
// roles, not executor-approval: status under the rule fails, naming the
// role to grant, instead of reporting the Head moved outside the tool
// (exit 5), which a 403 read as "the policies are not as printed" did.
func TestStatusWithoutThePoliciesReadIsNotTamper(t *testing.T) {
	p, _, _ := underTheRule(t, "dora")
	st, err := views.Status(context.Background(), cluster(t, cp.User(t, "dora")), p.ns, 0, nil)
	if err == nil || fail.Is(err, fail.Tamper) || !strings.Contains(err.Error(), "rbac --role executor-approval") {
		t.Fatalf("status as dora: %+v, %v; want an error naming the executor-approval role, not tamper", st, err)
	}
}

// underTheRule installs release 3.0.0 under the two-person rule in a
// fresh namespace (alice proposes, bob approves) and grants user exactly
// the printed deployer and proposer roles: it returns the namespace's
// people, the Head of generation 1 and user's client.
func underTheRule(t *testing.T, user string) (*twoPerson, *deploy.Head, kubernetes.Interface) {
	t.Helper()
	p := newTwoPerson(t)
	v300 := release(t, "v3.0.0", p.ns, "")
	h1 := p.installUnderTheRule(v300)
	return p, h1, printedDeployerAndProposer(t, p.ns, v300, user)
}
