package fleet_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/ceremony/fleet"
	"github.com/qinglong/kubectl-ql3/ceremony/fleet/fleetfile"
	fleetplan "github.com/qinglong/kubectl-ql3/ceremony/fleet/plan"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory"
	"github.com/qinglong/kubectl-ql3/receipts"
	"github.com/qinglong/kubectl-ql3/receipts/rollout"
)

const threeWaves = `- name: canary
  selector: {matchLabels: {ring: canary}}
- name: early
  selector: {matchLabels: {ring: early}}
  maxParallel: 1
- name: rest
  selector: {matchLabels: {ring: rest}}
  maxParallel: 4
`

// A fleet of 12 targets — 4 control namespaces on each of 3 real API
// servers — in 3 waves: locked, preflighted, applied and read back
// uniform; then an upgrade that one target of the second wave refuses
// (its Head moved by someone else since the preflight): the wave stops
// there, the third wave never starts (its namespaces' audit logs show no
// write), the summary names the target; preflighted again, the rerun
// finishes with nothing applied twice; every target's receipts audit.
func TestFleetRollout(t *testing.T) {
	rings := []string{"canary", "early", "early", "early", "rest", "rest", "rest", "rest", "rest", "rest", "rest", "rest"}
	b := newBed(t, 4, rings)
	for _, g := range b.targets {
		b.release(t, g, "v3.0.0", "")
	}
	f := b.file(t, threeWaves)
	var progress bytes.Buffer
	o := options(t, &progress)
	keys := signing(t, o)
	ctx := context.Background()
	rollOut(t, ctx, o, f, "3.0.0", 1)
	for _, g := range b.targets {
		b.release(t, g, "v3.1.0", "")
	}
	x := b.targets[1] // the first target of wave early
	p, dir := replan(t, ctx, o, f, "3.1.0", false)
	someoneElse(t, b, x)
	before := map[string]int{}
	for _, g := range b.targets {
		before[g.name] = writesIn(t, g.cluster, g.ns)
	}
	rep, err := fleet.Apply(ctx, o, f, fleet.ApplyRequest{Plan: p, PlanDir: dir})
	if !fail.Is(err, fail.Conflict) || !strings.Contains(err.Error(), x.name) || rep.Outcome != fleet.WaveStopped {
		t.Fatalf("apply with %s moved by someone else: %v (outcome %v), want conflict naming it and the fleet stopped\n%s", x.name, err, rep, progress.String())
	}
	wantStates(t, rep, map[string]string{"canary": fleet.WaveDone, "early": fleet.WaveStopped, "rest": fleet.WaveNotStarted})
	states := map[string]string{}
	for i, g := range b.targets {
		states[g.name] = map[bool]string{true: rollout.TargetCommitted, false: rollout.TargetNotStarted}[i == 0]
	}
	states[x.name] = rollout.TargetFailed
	wantRollout(t, rep, keys, rollout.OutcomeStopped, states)
	for _, g := range b.targets[2:] {
		if n := writesIn(t, g.cluster, g.ns); n != before[g.name] {
			t.Fatalf("%s (not started) had %d writes during the stopped apply", g.name, n-before[g.name])
		}
	}
	// Fixed by planning again: what is done is kept, x moves on from its
	// new Head; the rerun applies the rest, canary nothing twice.
	p, dir = replan(t, ctx, o, f, "3.1.0", false)
	rep, err = fleet.Apply(ctx, o, f, fleet.ApplyRequest{Plan: p, PlanDir: dir})
	if err != nil {
		t.Fatalf("apply after planning again: %v\n%s", err, progress.String())
	}
	if got := rep.Waves[0].Targets[0].State; got != fleet.StateAlreadyCommitted {
		t.Fatalf("canary on the rerun: %s, want %s", got, fleet.StateAlreadyCommitted)
	}
	if h := headOf(t, x.cluster, x.ns); h.Generation != 3 || h.Current.Version != "3.1.0" {
		t.Fatalf("%s: generation %d %s, want 3 at 3.1.0", x.name, h.Generation, h.Current.Version)
	}
	if h := headOf(t, 0, b.targets[0].ns); h.Generation != 2 {
		t.Fatalf("canary: generation %d, want 2 (applied once)", h.Generation)
	}
	status(t, ctx, o, f, p)
	auditAll(t, o, f, b)
	for _, g := range b.targets {
		states[g.name] = rollout.TargetCommitted
	}
	r := wantRollout(t, rep, keys, rollout.OutcomeDone, states)
	tamperRollout(t, filepath.Join(f.Dir, "receipts"), rep.Rollout, r, keys)
	// A target's receipts lost (written elsewhere): the rerun rebuilds its
	// receipt from the Head it reads back, signed and attested with its
	// release, and the rollout receipt proves it again.
	lost := filepath.Join(f.Dir, "receipts", b.targets[5].name)
	if err := os.RemoveAll(lost); err != nil {
		t.Fatal(err)
	}
	rep, err = fleet.Apply(ctx, o, f, fleet.ApplyRequest{Plan: p, PlanDir: dir})
	if err != nil {
		t.Fatalf("apply after %s's receipts were lost: %v", b.targets[5].name, err)
	}
	wantRollout(t, rep, keys, rollout.OutcomeDone, states)
}

// rollOut locks, preflights and applies f at version, and wants every
// target committed at generation gen and the fleet uniform.
func rollOut(t *testing.T, ctx context.Context, o *fleet.Options, f *fleetfile.Fleet, version string, gen int64) {
	t.Helper()
	p, dir := replan(t, ctx, o, f, version, false)
	rep, err := fleet.Apply(ctx, o, f, fleet.ApplyRequest{Plan: p, PlanDir: dir})
	if err != nil || rep.Outcome != fleet.WaveDone {
		t.Fatalf("apply %s: %v (%+v)", version, err, rep)
	}
	for _, w := range rep.Waves {
		for _, r := range w.Targets {
			if r.State != fleet.StateCommitted || r.Generation != gen {
				t.Fatalf("wave %s target %s: %s generation %d, want committed %d", w.Name, r.Name, r.State, r.Generation, gen)
			}
		}
	}
	status(t, ctx, o, f, p)
}

// plan locks every release at version (--update) and preflights the fleet.
func replan(t *testing.T, ctx context.Context, o *fleet.Options, f *fleetfile.Fleet, version string, rollback bool) (*fleetplan.Plan, string) {
	t.Helper()
	if _, err := fleet.Lock(ctx, o, f, fleet.LockRequest{Version: version, Update: true}); err != nil {
		t.Fatalf("lock %s: %v", version, err)
	}
	req := fleet.PreflightRequest{}
	if rollback {
		req.Transition = deploy.TransitionRollback
	}
	p, path, _, err := fleet.Preflight(ctx, o, f, req)
	if err != nil {
		t.Fatalf("preflight %s: %v", version, err)
	}
	return p, filepath.Dir(path)
}

func status(t *testing.T, ctx context.Context, o *fleet.Options, f *fleetfile.Fleet, p *fleetplan.Plan) {
	t.Helper()
	st, err := fleet.Status(ctx, o, f, p)
	if err != nil || !st.Uniform || len(st.Targets) != len(f.Targets) {
		t.Fatalf("status: %v (%+v), want uniform", err, st)
	}
}

func wantStates(t *testing.T, rep *fleet.ApplyReport, want map[string]string) {
	t.Helper()
	for _, w := range rep.Waves {
		if w.State != want[w.Name] {
			t.Fatalf("wave %s: %s, want %s", w.Name, w.State, want[w.Name])
		}
	}
}

// auditAll audits every target's receipts as one chain.
func auditAll(t *testing.T, o *fleet.Options, f *fleetfile.Fleet, b *bed) {
	t.Helper()
	for _, g := range b.targets {
		dir := filepath.Join(f.Dir, "receipts", g.name)
		rep, err := receipts.Audit([]string{dir}, receipts.AuditOptions{})
		if err != nil || !rep.OK() {
			t.Fatalf("receipts of %s: %v %+v", g.name, err, rep.Chain)
		}
	}
}

// someoneElse upgrades target g to 3.0.1 (3.0.0 relabelled) outside the
// fleet — as an operator with the admin's kubeconfig would — publishing
// into g's receipts directory, so its chain stays whole.
func someoneElse(t *testing.T, b *bed, g tgt) {
	t.Helper()
	other := &bed{dir: t.TempDir(), targets: []tgt{g}}
	other.release(t, g, "v3.0.0", "3.0.1")
	dir := filepath.Join(other.dir, "releases", g.name)
	cl, err := deploy.NewKubeCluster(cps[g.cluster].RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	id, err := deploy.ReadClusterIdentity(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	rel, err := inventory.Render(filesys.MakeFsOnDisk(), dir, inventory.Options{Mapper: cl.Mapper()})
	if err != nil {
		t.Fatal(err)
	}
	lock, err := inventory.NewLock(rel, "3.0.1", id, toolVersion)
	if err != nil {
		t.Fatal(err)
	}
	data, err := lock.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, inventory.LockFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
	do := deploy.Options{Cluster: cl, FS: filesys.MakeFsOnDisk(), ToolVersion: toolVersion, Timeout: 2 * time.Minute,
		ReceiptsDir: filepath.Join(b.dir, "receipts", g.name)}
	h := headOf(t, g.cluster, g.ns)
	pf, err := deploy.RunPreflight(ctx, do, deploy.PreflightRequest{Dir: dir, Transition: deploy.TransitionUpgrade, Expected: h.Expected(), Out: filepath.Join(other.dir, "pf.json")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := deploy.RunApply(ctx, do, pf.ApplyRequest()); err != nil {
		t.Fatal(err)
	}
}
