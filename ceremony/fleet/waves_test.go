package fleet_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/qinglong/kubectl-ql3/ceremony/access"
	"github.com/qinglong/kubectl-ql3/ceremony/approval"
	"github.com/qinglong/kubectl-ql3/ceremony/approval/gate/gatetest"
	"github.com/qinglong/kubectl-ql3/ceremony/approval/record"
	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/ceremony/fleet"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory"
)

// trigger is a progress writer that runs fn once, the first time a line
// containing mark is written: a fault placed at an exact point of the
// driver, without a timer.
type trigger struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	mark string
	fn   func()
	done bool
}

func (w *trigger) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if !w.done && strings.Contains(w.buf.String(), w.mark) {
		w.done = true
		w.fn()
	}
	return len(p), nil
}

// One API server stopped when the second wave starts: the target on it
// fails unavailable (exit 4, named), the fleet stops; with the API server
// back, a rerun of the same plan skips what committed and finishes. Then
// the fleet rolls back to the previous release, wave by wave.
func TestFleetUnavailableThenRollback(t *testing.T) {
	b := newBed(t, 1, []string{"one", "two", "two"})
	for _, g := range b.targets {
		b.release(t, g, "v3.0.0", "")
	}
	f := b.file(t, "- name: one\n  selector: {matchLabels: {ring: one}}\n- name: two\n  selector: {matchLabels: {ring: two}}\n  maxParallel: 2\n  maxFailures: 1\n")
	var quiet bytes.Buffer
	o := options(t, &quiet)
	ctx := context.Background()
	rollOut(t, ctx, o, f, "3.0.0", 1)
	for _, g := range b.targets { // the same objects, so that a rollback may return
		b.release(t, g, "v3.0.0", "3.0.1")
	}
	p, dir := replan(t, ctx, o, f, "3.0.1", false)
	down := b.targets[2] // on cluster 2
	tr := &trigger{mark: "wave two:", fn: func() {
		if err := cps[down.cluster].StopAPIServer(); err != nil {
			t.Error(err)
		}
	}}
	o.Progress = tr
	rep, err := fleet.Apply(ctx, o, f, fleet.ApplyRequest{Plan: p, PlanDir: dir})
	if err := cps[down.cluster].StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	if !fail.Is(err, fail.Unavailable) || !strings.Contains(err.Error(), down.name) {
		t.Fatalf("apply with %s's API server down: %v, want unavailable naming it\n%s", down.name, err, tr.buf.String())
	}
	if got := rep.Waves[1].Targets[1].State; got != fleet.StateFailed || rep.Waves[1].Targets[0].State != fleet.StateCommitted {
		t.Fatalf("wave two: %+v", rep.Waves[1])
	}
	rep, err = fleet.Apply(ctx, o, f, fleet.ApplyRequest{Plan: p, PlanDir: dir})
	if err != nil {
		t.Fatalf("rerun with the API server back: %v\n%s", err, tr.buf.String())
	}
	if s := rep.Waves[1].Targets[0].State; s != fleet.StateAlreadyCommitted {
		t.Fatalf("the committed target on the rerun: %s", s)
	}
	status(t, ctx, o, f, p)
	for _, g := range b.targets {
		b.release(t, g, "v3.0.0", "")
	}
	p, dir = replan(t, ctx, o, f, "3.0.0", true)
	if _, err := fleet.Apply(ctx, o, f, fleet.ApplyRequest{Plan: p, PlanDir: dir}); err != nil {
		t.Fatalf("rollback: %v", err)
	}
	for _, g := range b.targets {
		if h := headOf(t, g.cluster, g.ns); h.Generation != 3 || h.Current.Version != "3.0.0" || h.Transition.Kind != "rollback" {
			t.Fatalf("%s after the rollback: generation %d %s %s", g.name, h.Generation, h.Transition.Kind, h.Current.Version)
		}
	}
	status(t, ctx, o, f, p)
	auditAll(t, o, f, b)
}

// A wave gated by approval waits, with nothing of it written, until a
// second person approved each of its records; the proposer cannot approve
// her own. Alice drives the fleet (her kubeconfigs), bob approves, each
// holding exactly the printed roles on every cluster.
func TestFleetApprovalGate(t *testing.T) {
	b := newBed(t, 1, []string{"one", "two", "two"})
	for _, g := range b.targets {
		b.release(t, g, "v3.0.0", "")
	}
	for _, g := range b.targets { // one target per cluster
		gatetest.Install(t, cps[g.cluster].Clientset(), g.ns)
		b.printedRoles(t, g, "alice", "bob")
	}
	f := b.file(t, "- name: one\n  selector: {matchLabels: {ring: one}}\n- name: two\n  selector: {matchLabels: {ring: two}}\n  gate: approval\n  maxParallel: 2\n")
	var progress bytes.Buffer
	o := options(t, &progress)
	ctx := context.Background()
	p, dir := replan(t, ctx, o, f, "3.0.0", false)
	gated := b.targets[1:]
	before := map[string]int{}
	for _, g := range gated {
		before[g.name] = writesIn(t, g.cluster, g.ns)
	}
	rep, err := fleet.Apply(ctx, o, f, fleet.ApplyRequest{Plan: p, PlanDir: dir})
	if !fail.Is(err, fail.Invalid) || rep.Waves[0].State != fleet.WaveDone || rep.Waves[1].State != fleet.WaveAwaiting {
		t.Fatalf("apply before approval: %v %+v, want wave one done and wave two awaiting approval (exit 2)", err, rep)
	}
	for _, g := range gated {
		if n := writesIn(t, g.cluster, g.ns); n != before[g.name] {
			t.Fatalf("%s awaiting approval had %d writes", g.name, n-before[g.name])
		}
		rec := filepath.Join(dir, "preflights", g.name+".json")
		alice := clients(t, filepath.Join(b.dir, "kubeconfigs", fmt.Sprintf("c%d.yaml", g.cluster)))
		if _, err := approval.Propose(ctx, alice, approval.ProposeRequest{Record: rec}); err != nil {
			t.Fatal(err)
		}
		if _, err := approval.Decide(ctx, alice, approval.DecideRequest{Record: rec, Decision: record.Approved}); !fail.Is(err, fail.Invalid) {
			t.Fatalf("alice approving her own %s: %v, want refused (exit 2)", g.name, err)
		}
	}
	if _, err := fleet.Apply(ctx, o, f, fleet.ApplyRequest{Plan: p, PlanDir: dir}); !fail.Is(err, fail.Invalid) {
		t.Fatalf("apply after the proposer's own approvals: %v, want still awaiting (exit 2)", err)
	}
	for _, g := range gated {
		bob := clients(t, filepath.Join(b.dir, "kubeconfigs", fmt.Sprintf("c%d.yaml.bob", g.cluster)))
		if _, err := approval.Decide(ctx, bob, approval.DecideRequest{Record: filepath.Join(dir, "preflights", g.name+".json"), Decision: record.Approved, Reason: "reviewed"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := fleet.Apply(ctx, o, f, fleet.ApplyRequest{Plan: p, PlanDir: dir}); err != nil {
		t.Fatalf("apply once bob approved: %v\n%s", err, progress.String())
	}
	for _, g := range gated {
		if h := headOf(t, g.cluster, g.ns); h.Approval == nil || h.Approval.Approver != "bob" || h.Approval.Proposer != "alice" {
			t.Fatalf("%s: approval %+v, want proposed by alice, approved by bob", g.name, h.Approval)
		}
	}
	status(t, ctx, o, f, p)
}

// deployerRoles are the roles `kubectl ql3 rbac` prints for g's release
// on its cluster, bound to user.
func (b *bed) deployerRoles(t *testing.T, g tgt, user string) []any {
	t.Helper()
	rel, err := inventory.Render(filesys.MakeFsOnDisk(), filepath.Join(b.dir, "releases", g.name), inventory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := deploy.NewKubeCluster(cps[g.cluster].RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	roles, err := deploy.RBAC(rel.Objects, g.ns, cl.Mapper(), deploy.RBACSubject{User: user})
	if err != nil {
		t.Fatal(err)
	}
	return roles
}

// printedRoles grants, on g's cluster and in its namespace, exactly the
// roles docs/guide-two-person-rule.md prints: the deployer's (`rbac
// DIR`), executor-approval's and the proposer's to deployer, the
// approver's to approver; and writes their kubeconfigs where the fleet
// file names g's (the deployer's: the driver's) and beside it (".bob").
func (b *bed) printedRoles(t *testing.T, g tgt, deployer, approver string) {
	t.Helper()
	cp := cps[g.cluster]
	grants := map[string][]any{deployer: b.deployerRoles(t, g, deployer)}
	for _, r := range []struct{ role, user string }{{approval.RoleExecutor, deployer}, {approval.RoleProposer, deployer}, {approval.RoleApprover, approver}} {
		objs, err := approval.RBAC(r.role, g.ns, access.Subject{User: r.user})
		if err != nil {
			t.Fatal(err)
		}
		grants[r.user] = append(grants[r.user], objs...)
	}
	for user, suffix := range map[string]string{deployer: "", approver: ".bob"} {
		cp.GrantAll(t, grants[user])
		cp.WaitGranted(t, user, grants[user])
		kc, err := cp.Kubeconfig(user)
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(kc)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(b.dir, "kubeconfigs", fmt.Sprintf("c%d.yaml%s", g.cluster, suffix)), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func clients(t *testing.T, kubeconfig string) approval.Clients {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := approval.NewClients(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
