package fleet_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/qinglong/kubectl-ql3/ceremony/fleet"
	"github.com/qinglong/kubectl-ql3/ceremony/fleet/fleetfile"
	fleetplan "github.com/qinglong/kubectl-ql3/ceremony/fleet/plan"
	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// The test binary doubles as a separate driver process, so that the test
// can SIGKILL a driver in the middle of a wave: with driverEnv set it runs
// one fleet apply of the plan at driverPlanEnv and exits with its code.
const (
	driverEnv     = "QL3_FLEET_TEST_DRIVER"
	driverPlanEnv = "QL3_FLEET_TEST_PLAN"
)

func driver(file, planPath string) int {
	f, err := fleetfile.Load(file)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	data, err := os.ReadFile(planPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	p, err := fleetplan.Parse(planPath, data)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var quiet bytes.Buffer
	o := options(nil, &quiet)
	o.Progress = os.Stderr
	_, err = fleet.Apply(context.Background(), o, f, fleet.ApplyRequest{Plan: p, PlanDir: filepath.Dir(planPath)})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return fail.ClassOf(err).ExitCode()
	}
	return 0
}

// A driver SIGKILLed the moment the second wave's first target starts
// applying loses nothing: the rerun (here in-process) skips the first
// wave, resumes or applies the rest, and every target commits the plan's
// generation exactly once — its receipts audit as one chain.
func TestFleetDriverKilled(t *testing.T) {
	b := newBed(t, 2, []string{"one", "one", "one", "two", "two", "two"})
	for _, g := range b.targets {
		b.release(t, g, "v3.0.0", "")
	}
	f := b.file(t, "- name: one\n  selector: {matchLabels: {ring: one}}\n  maxParallel: 3\n- name: two\n  selector: {matchLabels: {ring: two}}\n  maxParallel: 2\n")
	var quiet bytes.Buffer
	o := options(t, &quiet)
	ctx := context.Background()
	rollOut(t, ctx, o, f, "3.0.0", 1)
	for _, g := range b.targets {
		b.release(t, g, "v3.0.0", "3.0.1")
	}
	p, dir := replan(t, ctx, o, f, "3.0.1", false)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), driverEnv+"="+filepath.Join(b.dir, "fleet.yaml"), driverPlanEnv+"="+filepath.Join(dir, fleet.PlanFile))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var seen strings.Builder
	killed := false
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		line := sc.Text()
		seen.WriteString(line + "\n")
		if !killed && strings.HasPrefix(line, "fleet: t0") && strings.Contains(line, ": applying") && inWave(p, line, "two") {
			killed = true
			_ = cmd.Process.Signal(syscall.SIGKILL)
		}
	}
	err = cmd.Wait()
	if !killed {
		t.Fatalf("the driver ended (%v) before the second wave started applying:\n%s", err, seen.String())
	}
	rep, err := fleet.Apply(ctx, o, f, fleet.ApplyRequest{Plan: p, PlanDir: dir})
	if err != nil {
		t.Fatalf("rerun after the kill: %v\n%s", err, quiet.String())
	}
	for _, r := range rep.Waves[0].Targets {
		if r.State != fleet.StateAlreadyCommitted {
			t.Fatalf("wave one on the rerun: %s %s, want already committed", r.Name, r.State)
		}
	}
	for _, g := range b.targets {
		if h := headOf(t, g.cluster, g.ns); h.Generation != 2 || h.Phase != "committed" || h.Current.Version != "3.0.1" {
			t.Fatalf("%s: generation %d %s %s, want 2 committed 3.0.1 (applied once)", g.name, h.Generation, h.Phase, h.Current.Version)
		}
	}
	status(t, ctx, o, f, p)
	auditAll(t, o, f, b)
}

// inWave says whether the target a progress line names is in wave w.
func inWave(p *fleetplan.Plan, line, w string) bool {
	name := strings.TrimSuffix(strings.Fields(strings.TrimPrefix(line, "fleet: "))[0], ":")
	_, i, ok := p.Find(name)
	return ok && p.Waves[i].Name == w
}
