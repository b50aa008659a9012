package fleet_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/ceremony/fleet"
	"github.com/qinglong/kubectl-ql3/ceremony/fleet/fleetfile"
	fleetplan "github.com/qinglong/kubectl-ql3/ceremony/fleet/plan"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory"
	"github.com/qinglong/kubectl-ql3/receipts"
)

// A Head is a claim, not evidence. Mallory holds exactly the deployer role
// `kubectl ql3 rbac` prints for the canary's release on its cluster; she
// writes the canary's Head committed at the plan's generation, every
// digest resealed, under the Head's own field manager name, and applies
// nothing. The driver must not count the canary done nor start the next
// wave: the objects the API server serves are still the previous
// release's. Before, it reported the canary "already committed" and rolled
// the release to the second wave's clusters. The same holds for the two
// other ways to the same judgement:
//   - --via-job skips a wave's Job only when every target is at the plan
//     and live as its release sets it: over the forged canary it must go
//     on to the Job — here one it cannot build (no --namespace), so the
//     wave fails naming it — and never say "no Job". With the shortcut
//     reading the Heads alone (as before 40a0175) it returned nil: the
//     wave, with no soak, was done.
//   - the live check compares the canary's objects with the release the
//     plan's record locked, not whatever the release directory holds:
//     with the canary's directory put back to the previous release
//     (locked, and exactly what its cluster still runs) the plan's lock
//     answers (conflict, naming it; the assertion requires that answer).
//     Behind it, status's own comparison of the release's lock with the
//     Head's refuses too (exit 2, naming --release): without the first
//     check the canary would still not pass, so this step is not an
//     attacker test that failed on the code before.
func TestFleetForgedHeadStopsTheWave(t *testing.T) {
	b, f := twoWaves(t)
	var progress bytes.Buffer
	o := options(t, &progress)
	ctx := context.Background()
	rollOut(t, ctx, o, f, "3.0.0", 1)
	canary, later := b.targets[0], b.targets[1:]
	canaryDir, old := filepath.Join(b.dir, "releases", canary.name), filepath.Join(t.TempDir(), "v3.0.0")
	if err := os.CopyFS(old, os.DirFS(canaryDir)); err != nil {
		t.Fatal(err)
	}
	for _, g := range b.targets {
		b.release(t, g, "v3.1.0", "")
	}
	p, dir := replan(t, ctx, o, f, "3.1.0", false)
	forgeHead(t, b, canary, p.Waves[0].Targets[0], dir)
	if h := headOf(t, canary.cluster, canary.ns); h.Generation != 2 || h.Phase != deploy.PhaseCommitted || h.Current.Version != "3.1.0" {
		t.Fatalf("the forged Head reads back as generation %d %s %s", h.Generation, h.Phase, h.Current.Version)
	}
	before := map[string]int{}
	for _, g := range later {
		before[g.name] = writesIn(t, g.cluster, g.ns)
	}
	rep, err := fleet.Apply(ctx, o, f, fleet.ApplyRequest{Plan: p, PlanDir: dir})
	if !fail.Is(err, fail.Conflict) || !strings.Contains(err.Error(), "drifted") || !strings.Contains(err.Error(), "its Head says generation 2 is committed") {
		t.Fatalf("apply over a forged canary Head: %v (class %v), want conflict: the canary's objects are not the release's\n%s", err, fail.ClassOf(err), progress.String())
	}
	if got := rep.Waves[0].Targets[0].State; got != fleet.StateFailed || rep.Waves[0].State != fleet.WaveStopped || rep.Waves[1].State == fleet.WaveDone {
		t.Fatalf("waves %+v: want the canary failed, its wave stopped and the next not run", rep.Waves)
	}
	progress.Reset()
	_, err = fleet.ApplyViaJob(ctx, o, f, fleet.ApplyRequest{Plan: p, PlanDir: dir}, fleet.ViaJob{Client: cps[0].Clientset()})
	if err == nil || !strings.Contains(err.Error(), `--namespace ""`) || strings.Contains(progress.String(), "no Job") {
		t.Fatalf("--via-job over the forged canary: %v\n%s\nwant the wave's Job attempted (and failing on its empty --namespace), no shortcut", err, progress.String())
	}
	if err := os.RemoveAll(canaryDir); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(canaryDir, os.DirFS(old)); err != nil {
		t.Fatal(err)
	}
	rep, err = fleet.Apply(ctx, o, f, fleet.ApplyRequest{Plan: p, PlanDir: dir})
	if !fail.Is(err, fail.Conflict) || !strings.Contains(err.Error(), "the plan's record "+p.Waves[0].Targets[0].LockDigest) || rep.Waves[0].Targets[0].State != fleet.StateFailed {
		t.Fatalf("apply with the canary's release put back to the one its cluster runs: %v (class %v), want conflict naming the plan's lock\n%s", err, fail.ClassOf(err), progress.String())
	}
	for _, g := range later {
		if n := writesIn(t, g.cluster, g.ns); n != before[g.name] {
			t.Fatalf("%s, in the wave after the forged canary, had %d writes", g.name, n-before[g.name])
		}
		if h := headOf(t, g.cluster, g.ns); h.Generation != 1 {
			t.Fatalf("%s moved to generation %d", g.name, h.Generation)
		}
	}
}

// forgeHead writes, as mallory with only the deployer role, g's Head
// committed at plan entry pt: built from the committed Head and pt's
// preflight record (both readable by whoever drives or reviews the
// fleet), sealed, written by resourceVersion compare-and-swap.
func forgeHead(t *testing.T, b *bed, g tgt, pt fleetplan.Target, planDir string) {
	t.Helper()
	ctx := context.Background()
	cp := cps[g.cluster]
	roles := b.deployerRoles(t, g, "mallory")
	cp.GrantAll(t, roles)
	cp.WaitGranted(t, "mallory", roles)
	rec, err := deploy.ReadPreflight(filepath.Join(planDir, filepath.FromSlash(pt.Preflight)))
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(b.dir, "receipts", g.name, "000001-install-3.0.0.receipt.json"))
	if err != nil {
		t.Fatal(err)
	}
	prior, err := receipts.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	rel, err := inventory.Render(filesys.MakeFsOnDisk(), filepath.Join(b.dir, "releases", g.name), inventory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := headOf(t, g.cluster, g.ns)
	prev := h.Current.Deployment
	h.Previous, h.Generation, h.Phase = &prev, pt.Generation, deploy.PhaseCommitted
	h.Transition = deploy.HeadTransition{Transition: receipts.Transition{Kind: rec.Command.Transition, CommandDigest: rec.CommandDigest, PreflightDigest: rec.SelfDigest}, MutationID: strings.Repeat("f", 32)}
	h.Current = deploy.HeadDeployment{Deployment: receipts.Deployment{Version: rec.Release.Version, LockDigest: rec.Release.LockDigest,
		InventoryDigest: rec.Release.InventoryDigest, InventoryCount: rec.Release.InventoryCount}, Inventory: rel.Inventory}
	h.PreviousReceiptDigest = prior.SelfDigest
	if err := h.Seal(); err != nil {
		t.Fatal(err)
	}
	cm, err := h.ConfigMap(g.ns)
	if err != nil {
		t.Fatal(err)
	}
	mallory, err := kubernetes.NewForConfig(cp.User(t, "mallory"))
	if err != nil {
		t.Fatal(err)
	}
	live, err := mallory.CoreV1().ConfigMaps(g.ns).Get(ctx, deploy.HeadName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.ResourceVersion = live.ResourceVersion
	if _, err := mallory.CoreV1().ConfigMaps(g.ns).Update(ctx, cm, metav1.UpdateOptions{FieldManager: deploy.HeadFieldManager}); err != nil {
		t.Fatalf("mallory's Head write: %v", err)
	}
	if evs := cp.WritesBy(t, "mallory", g.ns); len(evs) != 1 || evs[0].ObjectRef.Name != deploy.HeadName {
		t.Fatalf("mallory's writes in %s: %+v, want the one Head update", g.ns, evs)
	}
}

// A kubeconfig that reaches another cluster is not the target: target
// t00's kubeconfig is replaced by cluster 1's, where a Head at the plan
// waits in t00's namespace (sealed, naming cluster 1, so it reads as
// well formed there). fleet status must not report t00 at the plan, nor
// may a read-back count it: each compares the cluster reached with the
// plan's. Before, status said "at plan" for a cluster nothing was
// deployed to.
func TestFleetStatusChecksTheCluster(t *testing.T) {
	b, f := twoWaves(t)
	var progress bytes.Buffer
	ctx := context.Background()
	o := options(t, &progress)
	p, dir := replan(t, ctx, o, f, "3.0.0", false)
	if _, err := fleet.Apply(ctx, o, f, fleet.ApplyRequest{Plan: p, PlanDir: dir}); err != nil {
		t.Fatal(err)
	}
	g := b.targets[0]
	h := headOf(t, g.cluster, g.ns)
	h.Target.ClusterIdentity = inventory.ClusterIdentity(cps[1].KubeSystemUID(t))
	if err := h.Seal(); err != nil {
		t.Fatal(err)
	}
	cm, err := h.ConfigMap(g.ns)
	if err != nil {
		t.Fatal(err)
	}
	other := cps[1].Clientset()
	if _, err := other.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: g.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := other.CoreV1().ConfigMaps(g.ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c1, err := os.ReadFile(filepath.Join(b.dir, "kubeconfigs", "c1.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(b.dir, "kubeconfigs", "c0.yaml"), c1, 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := fleet.Status(ctx, options(t, &progress), f, p)
	if !fail.Is(err, fail.Invalid) || st == nil || st.Uniform || st.Targets[0].State != fleet.Unreadable || !strings.Contains(st.Targets[0].Error, "the plan's is "+p.Waves[0].Targets[0].ClusterIdentity) {
		t.Fatalf("fleet status with t00's kubeconfig reaching cluster 1: %v %+v, want t00 unreadable naming the plan's cluster (exit 2)", err, st)
	}
	if _, err := fleet.Apply(ctx, options(t, &progress), f, fleet.ApplyRequest{Plan: p, PlanDir: dir}); !fail.Is(err, fail.Invalid) || !strings.Contains(err.Error(), "reach cluster") {
		t.Fatalf("a rerun of apply with t00's kubeconfig reaching cluster 1: %v, want invalid naming the cluster", err)
	}
}

// An index a failed Job left unrun is "not started" only while its
// target's Head is still the one its record was preflighted against: the
// Job controller may delete a running pod before the driver lists pods.
// t01's Head is moved by another record after the plan was made: it is
// failed, conflict (preflight again), the untouched ones stay not started.
func TestUntouchedReadsTheHead(t *testing.T) {
	b, f := oneWave(t)
	ctx := context.Background()
	var progress bytes.Buffer
	o := options(t, &progress)
	rollOut(t, ctx, o, f, "3.0.0", 1)
	for _, g := range b.targets {
		b.release(t, g, "v3.1.0", "")
	}
	p, _ := replan(t, ctx, o, f, "3.1.0", false)
	moved := &bed{dir: b.dir, targets: b.targets[1:2]}
	b.release(t, moved.targets[0], "v3.1.0", "3.1.1")
	other := moved.file(t, "- name: one\n  selector: {matchLabels: {ring: one}}\n")
	p2, dir2 := replan(t, ctx, o, other, "3.1.1", false)
	if _, err := fleet.Apply(ctx, o, other, fleet.ApplyRequest{Plan: p2, PlanDir: dir2}); err != nil {
		t.Fatal(err)
	}
	w := p.Waves[0]
	wr := fleet.WaveResult{Name: w.Name}
	for _, pt := range w.Targets {
		wr.Targets = append(wr.Targets, fleet.TargetResult{Name: pt.Name, Namespace: pt.Namespace, State: fleet.StateNotStarted})
	}
	fleet.Untouched(options(t, &progress), ctx, f, w, &wr)
	for i, r := range wr.Targets {
		switch i {
		case 1:
			if r.State != fleet.StateFailed || r.Exit != 3 || !strings.Contains(r.Error, "its Head moved since the plan by another record") {
				t.Fatalf("%s, moved by another record: %+v, want failed, exit 3", r.Name, r)
			}
		default:
			if r.State != fleet.StateNotStarted || r.Error != "" {
				t.Fatalf("%s, untouched: %+v, want not started", r.Name, r)
			}
		}
	}
}

// A receipt the fleet proves a target by must be a file of the receipts
// directory itself: its name replaced by a symbolic link to an identical
// copy elsewhere (which that copy's owner could change later), a rerun
// refuses as tamper, naming the link, and leaves it. Before, the rerun
// read through the link, found the bytes, and cited it in its rollout
// receipt.
func TestFleetRefusesALinkedReceipt(t *testing.T) {
	b, f := oneWave(t)
	ctx := context.Background()
	var progress bytes.Buffer
	o := options(t, &progress)
	p, dir := replan(t, ctx, o, f, "3.0.0", false)
	if _, err := fleet.Apply(ctx, o, f, fleet.ApplyRequest{Plan: p, PlanDir: dir}); err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(f.Dir, "receipts", b.targets[0].name, "000001-install-3.0.0.receipt.json")
	copyElsewhere := filepath.Join(t.TempDir(), "copy.json")
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(copyElsewhere, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(name); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(copyElsewhere, name); err != nil {
		t.Fatal(err)
	}
	_, err = fleet.Apply(ctx, o, f, fleet.ApplyRequest{Plan: p, PlanDir: dir})
	if !fail.Is(err, fail.Tamper) || !strings.Contains(err.Error(), "is a symbolic link") {
		t.Fatalf("rerun with a linked receipt: %v (class %v), want tamper naming the link", err, fail.ClassOf(err))
	}
	if fi, err := os.Lstat(name); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link was replaced: %v %v", fi, err)
	}
}

// twoWaves is a fleet of three targets, one per cluster, at release
// v3.0.0 (not deployed yet): wave one the first, wave two the others.
func twoWaves(t *testing.T) (*bed, *fleetfile.Fleet) {
	t.Helper()
	return bedAt(t, []string{"one", "two", "two"}, "- name: one\n  selector: {matchLabels: {ring: one}}\n- name: two\n  selector: {matchLabels: {ring: two}}\n  maxParallel: 2\n")
}

// oneWave is the same three targets in one wave.
func oneWave(t *testing.T) (*bed, *fleetfile.Fleet) {
	t.Helper()
	return bedAt(t, []string{"one", "one", "one"}, "- name: one\n  selector: {matchLabels: {ring: one}}\n  maxParallel: 3\n")
}

func bedAt(t *testing.T, rings []string, waves string) (*bed, *fleetfile.Fleet) {
	t.Helper()
	b := newBed(t, 1, rings)
	for _, g := range b.targets {
		b.release(t, g, "v3.0.0", "")
	}
	return b, b.file(t, waves)
}
