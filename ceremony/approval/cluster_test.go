package approval_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qinglong/kubectl-ql3/ceremony/approval"
	"github.com/qinglong/kubectl-ql3/ceremony/approval/gate"
	"github.com/qinglong/kubectl-ql3/ceremony/approval/record"
	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/faults"
)

func propose(t *testing.T, c approval.Clients, path string, replace bool) (*approval.Result, error) {
	t.Helper()
	return approval.Propose(context.Background(), c, approval.ProposeRequest{Record: path, Replace: replace})
}

func decide(c approval.Clients, path, d, reason string) (*approval.Result, error) {
	return approval.Decide(context.Background(), c, approval.DecideRequest{Record: path, Decision: d, Reason: reason})
}

func digests(t *testing.T, path string) (string, string) {
	t.Helper()
	rec, err := deploy.ReadPreflight(path)
	if err != nil {
		t.Fatal(err)
	}
	return rec.SelfDigest, rec.CommandDigest
}

// The lifecycle on a real API server enforcing the printed policy, each
// person with the printed role only: alice proposes (a rerun is a replay),
// alice cannot approve her own proposal, bob approves (a rerun is a
// replay), the gate accepts exactly that record, not an edited one, and a
// new record for the same Head supersedes the approval.
func TestProposeApproveCheck(t *testing.T) {
	installPolicy(t)
	ns := cp.Namespace(t)
	for _, u := range []struct{ user, role string }{{"alice", approval.RoleProposer}, {"alice", approval.RoleApprover}, {"bob", approval.RoleApprover}, {"exec", approval.RoleExecutor}} {
		grant(t, u.role, ns, u.user, -1, "")
	}
	alice, bob := clients(t, "alice"), clients(t, "bob")
	pf := preflightRecord(t, ns, "3.0.0")
	pd, cd := digests(t, pf)
	res, err := propose(t, alice, pf, false)
	if err != nil || res.Outcome != "proposed" || res.Approval.Proposer != "alice" || res.Approval.Decision != record.Pending {
		t.Fatalf("propose: %+v, %v", res, err)
	}
	if again, err := propose(t, alice, pf, false); err != nil || again.Outcome != "replayed" || again.ResourceVersion != res.ResourceVersion {
		t.Fatalf("propose again: %+v, %v, want a replay", again, err)
	}
	if _, err := decide(alice, pf, record.Approved, ""); !fail.Is(err, fail.Invalid) || !contains(err, "you (alice) proposed this preflight") {
		t.Fatalf("self-approval: %v, want invalid naming alice", err)
	}
	exec := mustClients(t, cp.User(t, "exec"))
	if _, err := gate.Check(context.Background(), exec.CS, ns, pd, cd, deploy.AbsentToken); !fail.Is(err, fail.Invalid) || !contains(err, "still pending") {
		t.Fatalf("check of a pending approval: %v", err)
	}
	got, err := decide(bob, pf, record.Approved, "reviewed")
	if err != nil || got.Outcome != record.Approved || got.Approval.Approver != "bob" {
		t.Fatalf("approve: %+v, %v", got, err)
	}
	if again, err := decide(bob, pf, record.Approved, "reviewed"); err != nil || again.Outcome != "replayed" {
		t.Fatalf("approve again: %+v, %v, want a replay", again, err)
	}
	ok, err := gate.Check(context.Background(), exec.CS, ns, pd, cd, deploy.AbsentToken)
	if err != nil || ok.Proposer != "alice" || ok.Approver != "bob" || ok.ResourceVersion != got.ResourceVersion || ok.UID != got.UID {
		t.Fatalf("check: %+v, %v", ok, err)
	}
	// An edited record (another version) is another preflight: its digest
	// differs, so neither approve nor the gate takes the approval for it.
	edited := preflightRecord(t, ns, "3.0.1")
	ed, ec := digests(t, edited)
	if _, err := decide(bob, edited, record.Approved, ""); !fail.Is(err, fail.Conflict) || !contains(err, "approved by bob") {
		t.Fatalf("approve an edited record: %v, want a conflict", err)
	}
	if _, err := gate.Check(context.Background(), exec.CS, ns, ed, ec, deploy.AbsentToken); !fail.Is(err, fail.Invalid) || !contains(err, "propose this one") {
		t.Fatalf("check of an edited record: %v", err)
	}
	// The new record proposed replaces the decided approval: the old
	// preflight is no longer approved.
	if r, err := propose(t, alice, edited, false); err != nil || r.Outcome != "replaced" || r.Replaced == nil || r.Replaced.Approver != "bob" {
		t.Fatalf("propose the superseding record: %+v, %v", r, err)
	}
	if _, err := gate.Check(context.Background(), exec.CS, ns, pd, cd, deploy.AbsentToken); !fail.Is(err, fail.Invalid) {
		t.Fatalf("check of the superseded preflight: %v, want refused", err)
	}
	// A pending proposal still valid for the Head is replaced only with --replace.
	third := preflightRecord(t, ns, "3.0.2")
	if _, err := propose(t, alice, third, false); !fail.Is(err, fail.Conflict) || !contains(err, "--replace") {
		t.Fatalf("propose over a pending proposal: %v", err)
	}
	if r, err := propose(t, alice, third, true); err != nil || r.Outcome != "replaced" {
		t.Fatalf("propose --replace: %+v, %v", r, err)
	}
	if _, err := decide(bob, third, record.Rejected, "not today"); err != nil {
		t.Fatal(err)
	}
	if _, err := decide(bob, third, record.Approved, ""); !fail.Is(err, fail.Conflict) || !contains(err, "rejected by bob") {
		t.Fatalf("approve a rejected proposal: %v", err)
	}
	st, err := approval.Status(context.Background(), alice, ns)
	if err != nil || !st.Present || st.Approval.Decision != record.Rejected || st.Approval.Reason != "not today" || !st.MatchesHead {
		t.Fatalf("status: %+v, %v", st, err)
	}
}

// Two approvers at once, driven: carol reads the pending approval and her
// update is held until bob has read, written and finished; exactly one
// wins (bob), and carol's 409, settled by reading, is a conflict naming
// bob. An approval whose answer is lost settles by reading to success.
func TestApproversRaceAndLostAnswer(t *testing.T) {
	installPolicy(t)
	ns := cp.Namespace(t)
	grant(t, approval.RoleProposer, ns, "alice", -1, "")
	for _, u := range []string{"bob", "carol", "dave"} {
		grant(t, approval.RoleApprover, ns, u, -1, "")
	}
	pf := preflightRecord(t, ns, "3.0.0")
	if _, err := propose(t, clients(t, "alice"), pf, false); err != nil {
		t.Fatal(err)
	}
	carolCfg := cp.User(t, "carol")
	hold := faults.Hold(carolCfg, faults.Write(http.MethodPut, record.Name))
	carol := mustClients(t, carolCfg)
	carolErr := make(chan error, 1)
	go func() {
		_, err := decide(carol, pf, record.Approved, "")
		carolErr <- err
	}()
	<-hold.Reached() // carol has read the pending approval and is about to write
	if r, err := decide(clients(t, "bob"), pf, record.Rejected, "too risky"); err != nil || r.Outcome != record.Rejected {
		t.Fatalf("bob: %+v, %v", r, err)
	}
	hold.Release()
	if err := <-carolErr; !fail.Is(err, fail.Conflict) || !contains(err, "rejected by bob") {
		t.Fatalf("carol: %v, want a conflict naming bob", err)
	}
	cm, err := cp.Clientset().CoreV1().ConfigMaps(ns).Get(context.Background(), record.Name, metav1.GetOptions{})
	if err != nil || cm.Data[record.KeyApprover] != "bob" || cm.Data[record.KeyDecision] != record.Rejected {
		t.Fatalf("after the race: %v %v", cm.Data, err)
	}

	// A lost answer: dave's approval lands, its answer is thrown away.
	pf2 := preflightRecord(t, ns, "3.0.1")
	if _, err := propose(t, clients(t, "alice"), pf2, false); err != nil {
		t.Fatal(err)
	}
	cfg := cp.User(t, "dave")
	f := faults.Drop(cfg, faults.Write(http.MethodPut, record.Name))
	r, err := decide(mustClients(t, cfg), pf2, record.Approved, "")
	if err != nil || !r.Settled || r.Approval.Approver != "dave" || f.Fired() != 1 {
		t.Fatalf("lost answer: %+v, %v (fault fired %d)", r, err, f.Fired())
	}
}

// Each printed role is minimal: with any one verb of any one rule removed,
// the command fails closed and the API server's audit log shows no write
// of a ConfigMap by that user; with the role as printed it succeeds.
func TestRolesAreMinimal(t *testing.T) {
	installPolicy(t)
	ns := cp.Namespace(t)
	grant(t, approval.RoleProposer, ns, "alice", -1, "")
	grant(t, approval.RoleApprover, ns, "bob", -1, "")
	old := preflightRecord(t, ns, "2.9.0")
	if _, err := propose(t, clients(t, "alice"), old, false); err != nil {
		t.Fatal(err)
	}
	if _, err := decide(clients(t, "bob"), old, record.Approved, ""); err != nil {
		t.Fatal(err)
	}
	// Proposing over a decided approval uses every proposer permission.
	pf := preflightRecord(t, ns, "3.0.0")
	for i, rv := range rulesOf(t, approval.RoleProposer) {
		user := fmt.Sprintf("proposer-%d", i)
		t.Run(fmt.Sprintf("proposer without %s of rule %d", rv[1], rv[0]), func(t *testing.T) {
			grant(t, approval.RoleProposer, ns, user, rv[0].(int), rv[1].(string))
			if _, err := propose(t, clients(t, user), pf, false); err == nil {
				t.Fatal("propose succeeded")
			}
			cp.NoWrites(t, user, ns, "configmaps")
		})
	}
	grant(t, approval.RoleProposer, ns, "paul", -1, "")
	if _, err := propose(t, clients(t, "paul"), pf, false); err != nil {
		t.Fatalf("propose with the printed role: %v", err)
	}
	for i, rv := range rulesOf(t, approval.RoleApprover) {
		user := fmt.Sprintf("approver-%d", i)
		t.Run(fmt.Sprintf("approver without %s of rule %d", rv[1], rv[0]), func(t *testing.T) {
			grant(t, approval.RoleApprover, ns, user, rv[0].(int), rv[1].(string))
			if _, err := decide(clients(t, user), pf, record.Approved, ""); err == nil {
				t.Fatal("approve succeeded")
			}
			cp.NoWrites(t, user, ns, "configmaps")
		})
	}
	grant(t, approval.RoleApprover, ns, "anna", -1, "")
	if _, err := decide(clients(t, "anna"), pf, record.Approved, ""); err != nil {
		t.Fatalf("approve with the printed role: %v", err)
	}
	for i, rv := range rulesOf(t, approval.RoleExecutor) {
		user := fmt.Sprintf("executor-%d", i)
		t.Run(fmt.Sprintf("executor without %s of rule %d", rv[1], rv[0]), func(t *testing.T) {
			grant(t, approval.RoleExecutor, ns, user, rv[0].(int), rv[1].(string))
			pd, cd := digests(t, pf)
			if _, err := gate.Check(context.Background(), clients(t, user).CS, ns, pd, cd, deploy.AbsentToken); err == nil {
				t.Fatal("check succeeded")
			}
			cp.NoWrites(t, user, ns, "configmaps")
		})
	}
	grant(t, approval.RoleExecutor, ns, "ed", -1, "")
	pd, cd := digests(t, pf)
	if _, err := gate.Check(context.Background(), clients(t, "ed").CS, ns, pd, cd, deploy.AbsentToken); err != nil {
		t.Fatalf("check with the printed role: %v", err)
	}
}
