package deploy_test

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/qinglong/kubectl-ql3/ceremony/access"
	"github.com/qinglong/kubectl-ql3/ceremony/approval"
	"github.com/qinglong/kubectl-ql3/ceremony/approval/gate"
	"github.com/qinglong/kubectl-ql3/ceremony/approval/gate/gatetest"
	"github.com/qinglong/kubectl-ql3/ceremony/approval/record"
	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/ceremony/deploy/deploytest"
	"github.com/qinglong/kubectl-ql3/ceremony/views"
	"github.com/qinglong/kubectl-ql3/inventory"
	"github.com/qinglong/kubectl-ql3/receipts"
)

// printedDeployerAndProposer is user holding exactly the roles
// docs/guide-two-person-rule.md gives one person: the deployer's (`kubectl ql3 rbac DIR`) and the
// proposer's (`rbac --role proposer`), and nothing else.
func printedDeployerAndProposer(t *testing.T, ns, dir, user string) kubernetes.Interface {
	t.Helper()
	rel, err := inventory.Render(filesys.MakeFsOnDisk(), dir, inventory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := deploy.RBAC(rel.Objects, ns, cluster(t, cp.RESTConfig()).Mapper(), deploy.RBACSubject{User: user})
	if err != nil {
		t.Fatal(err)
	}
	prop, err := approval.RBAC(approval.RoleProposer, ns, access.Subject{User: user})
	if err != nil {
		t.Fatal(err)
	}
	objs = append(objs, prop...)
	cp.GrantAll(t, objs)
	cp.WaitGranted(t, user, objs)
	cs, err := kubernetes.NewForConfig(userConfig(t, user))
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// rawHeadWrite is a Head update as a bypass of the tool sends it: h
// sealed, over the Head's current resourceVersion, under the tool's own
// field manager name.
func rawHeadWrite(t *testing.T, cs kubernetes.Interface, ns string, h deploy.Head) error {
	t.Helper()
	if err := h.Seal(); err != nil {
		t.Fatal(err)
	}
	cm, err := h.ConfigMap(ns)
	if err != nil {
		t.Fatal(err)
	}
	cur, err := cs.CoreV1().ConfigMaps(ns).Get(context.Background(), deploy.HeadName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.ResourceVersion = cur.ResourceVersion
	_, err = cs.CoreV1().ConfigMaps(ns).Update(context.Background(), cm, metav1.UpdateOptions{FieldManager: deploy.HeadFieldManager})
	return err
}

// One person holding the printed deployer and proposer roles, with the
// rule on at generation 1, writes the Head raw (client-go, the tool's
// field manager name): dropping the rule, naming an approval that never
// existed, reusing generation 1's, and — after deleting the approval
// object, which the proposer role may — naming it again. The API server
// denies each (its audit log: no Head write of theirs succeeded). With the
// Head policy's binding removed, the made-up approval lands; status and
// history flag it, and still do once the binding is back.
func TestRawHeadWriteUnderTheRule(t *testing.T) {
	p := newTwoPerson(t)
	v300 := release(t, "v3.0.0", p.ns, "")
	h1 := p.installUnderTheRule(v300)
	mallory := printedDeployerAndProposer(t, p.ns, v300, "mallory")
	drop := deploytest.Next(t, h1, "3.0.1")
	drop.ApprovalPolicy, drop.Approval = "", nil
	madeUp := deploytest.Next(t, h1, "3.0.1")
	madeUp.Approval = &deploy.HeadApproval{Proposer: "alice", Approver: "bob", UID: "6c0a1e55-0000-4000-8000-000000000000", ResourceVersion: "1"}
	reuse := deploytest.Next(t, h1, "3.0.1")
	before := headRV(t, p.ns)
	for _, c := range []struct {
		name string
		h    deploy.Head
		want string
	}{{"the rule dropped", drop, gate.MsgHeadClaim}, {"a made-up approval", madeUp, gate.MsgHeadParams}, {"generation 1's approval reused", reuse, gate.MsgHeadClaim}} {
		if err := rawHeadWrite(t, mallory, p.ns, c.h); !gate.IsHeadDenial(err, c.want) {
			t.Fatalf("%s: %v, want the Head policy's denial %q", c.name, err, c.want)
		}
	}
	if err := mallory.CoreV1().ConfigMaps(p.ns).Delete(context.Background(), record.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("the proposer role deletes the approval object: %v", err)
	}
	if err := rawHeadWrite(t, mallory, p.ns, madeUp); err == nil || !strings.Contains(err.Error(), gate.HeadPolicyName) {
		t.Fatalf("a made-up approval with the approval object gone: %v, want the Head policy's denial", err)
	}
	if got := headRV(t, p.ns); got != before {
		t.Fatalf("the Head moved: resourceVersion %s, was %s", got, before)
	}
	for _, e := range cp.WritesBy(t, "mallory", p.ns) {
		if e.ObjectRef.Name == deploy.HeadName && e.ResponseStatus.Code < 300 {
			t.Fatalf("the audit log shows a Head write by mallory that succeeded: %+v", e)
		}
	}
	unprotected(t, p, mallory, madeUp)
}

// unprotected removes the Head policy's binding, writes madeUp as mallory
// once the API server no longer denies it, and requires status and
// history to flag the Head; then with the binding back, still.
func unprotected(t *testing.T, p *twoPerson, mallory kubernetes.Interface, madeUp deploy.Head) {
	t.Helper()
	ctx := context.Background()
	adm := cp.Clientset().AdmissionregistrationV1()
	if err := adm.ValidatingAdmissionPolicyBindings().Delete(ctx, gate.HeadPolicyName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var last error
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		last = rawHeadWrite(t, mallory, p.ns, madeUp)
		return last == nil, nil
	}); err != nil {
		t.Fatalf("the raw write never landed without the Head binding: %v", last)
	}
	flagged := func(when, want string) {
		t.Helper()
		st, err := views.Status(ctx, p.alice.Cluster, p.ns, 0, nil)
		if err != nil || !strings.Contains(strings.Join(st.Bypass, "\n"), want) || st.Err() == nil {
			t.Fatalf("status %s: bypass %q, %v; want a finding %q and exit 5", when, st.Bypass, err, want)
		}
		rep, err := views.HistoryAtHead(ctx, p.alice.Cluster, p.alice.ReceiptsDir, p.ns)
		if err != nil || rep.Err() == nil || !strings.Contains(strings.Join(rep.Chain.Reasons, "\n"), want) {
			t.Fatalf("history -n %s: %+v, %v; want the chain to fail with %q", when, rep, err, want)
		}
	}
	flagged("without the Head binding", "does not hold the approval policies as the tool prints them")
	gatetest.Install(t, cp.Clientset(), p.ns)
	flagged("with the binding back", "so the Head policy may not have checked that claim")
}

func headRV(t *testing.T, ns string) string {
	t.Helper()
	cm, err := cp.Clientset().CoreV1().ConfigMaps(ns).Get(context.Background(), deploy.HeadName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm.ResourceVersion
}

// A raw write that drops the rule, landed where the Head policy is not
// installed, breaks the receipt chain: its receipt (built from the Head as
// a rerun of apply rebuilds it) fails the audit, naming the move.
func TestRawHeadWriteBreaksTheAuditChain(t *testing.T) {
	p := newTwoPerson(t)
	v300 := release(t, "v3.0.0", p.ns, "")
	h1 := p.installUnderTheRule(v300)
	raw := deploytest.Next(t, h1, "3.0.1")
	raw.ApprovalPolicy, raw.Approval = "", nil
	withoutHeadBinding(t, p.ns, func() {
		cp.Kubectl(t, deploytest.Manifest(t, p.ns, raw), "replace", "-f", "-", "--field-manager", deploy.HeadFieldManager)
	})
	h2 := headOf(t, p.ns)
	if h2.Generation != 2 || h2.Approval != nil || h2.ApprovalPolicy != "" {
		t.Fatalf("raw head: %+v", h2)
	}
	r2, err := deploy.ReceiptFromHead(h2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := receipts.Publish(p.alice.ReceiptsDir, r2, nil, nil); err != nil {
		t.Fatal(err)
	}
	rep, err := receipts.Audit([]string{p.alice.ReceiptsDir}, receipts.AuditOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := "generation 2 moved without an approval while the two-person rule was on (generation 1 has approvalPolicy two-person)"
	if rep.OK() || len(rep.Receipts) != 2 || !strings.Contains(strings.Join(rep.Chain.Reasons, "\n"), want) {
		t.Fatalf("audit: verdict %s, chain %+v; want the chain to fail with %q", rep.Verdict, rep.Chain, want)
	}
}

// withoutHeadBinding runs write with the Head policy's binding deleted,
// polling until the API server stops enforcing it (write is retried only
// through the poll), then reinstalls the policies as printed.
func withoutHeadBinding(t *testing.T, ns string, write func()) {
	t.Helper()
	ctx := context.Background()
	if err := cp.Clientset().AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, gate.HeadPolicyName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	probe := gate.ProbeHead(ns)
	var last error
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, last = cp.Clientset().CoreV1().ConfigMaps(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return last == nil || !strings.Contains(last.Error(), gate.HeadPolicyName), nil
	}); err != nil {
		t.Fatalf("the Head policy is still enforced after its binding was deleted: %v", last)
	}
	write()
	gatetest.Install(t, cp.Clientset(), ns)
}
