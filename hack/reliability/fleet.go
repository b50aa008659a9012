package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// --- fleet: the driver SIGKILLed at random moments, then rerun -------------

// fleetKills are where a fleet apply is killed: anywhere from its start,
// as the second wave starts, or as some target starts applying.
var fleetKills = []timedKill{
	{"", 3 * time.Second},
	{"fleet: wave two:", 1500 * time.Millisecond},
	{": applying", 800 * time.Millisecond},
}

type fleetTally struct {
	killed, late, converged int
}

// caseFleet: a fleet of three targets (control namespaces of the campaign's
// API server: the driver is what is killed here; fleets of several real
// API servers are ceremony/fleet's tests) in two waves, installed, then
// upgraded by a `kubectl ql3 fleet apply` killed at a random moment; a
// rerun must exit 0 with every target committed at the plan's generation
// exactly once (generation 2) and every target's receipts auditing.
func caseFleet(c *campaign, cs *caseState) []Row {
	runs := c.runs(10, 1)
	row, t0 := openRow("fleet: SIGKILL of the driver at random moments, then rerun", runs,
		"the rerun of fleet apply exits 0; every target's Head committed at generation 2 (the plan's, applied once); every target's receipts audit; fleet status exits 0")
	rng := rand.New(rand.NewPCG(cs.seed, 0xf1ee7))
	var t fleetTally
	for run := range runs {
		if err := c.fleetKillRun(rng, &t); err != nil {
			cs.failf("run %d: %v [replay: -seed %d -case fleet]", run, err, cs.seed)
		}
	}
	row.Observed = fmt.Sprintf("%d/%d runs converged; %d driver kills (%d came after the driver had ended)", t.converged, runs, t.killed, t.late)
	row.Pass = t.converged == runs && len(cs.failures()) == 0
	return []Row{closeRow(cs, row, t0)}
}

func (c *campaign) fleetKillRun(rng *rand.Rand, t *fleetTally) error {
	dir, file, err := c.fleetBed()
	if err != nil {
		return err
	}
	kc := filepath.Join(dir, "kubeconfigs", "admin.yaml")
	steps := [][]string{{"fleet", "lock", file, "--version", "3.0.0"}, {"fleet", "preflight", file}, {"fleet", "apply", file}}
	for _, s := range steps {
		if err := c.ok(kc, s...); err != nil {
			return fmt.Errorf("install: %w", err)
		}
	}
	if err := relabel(dir, "3.0.1"); err != nil {
		return err
	}
	for _, s := range [][]string{{"fleet", "lock", file, "--version", "3.0.1", "--update"}, {"fleet", "preflight", file}} {
		if err := c.ok(kc, s...); err != nil {
			return fmt.Errorf("upgrade: %w", err)
		}
	}
	tk := fleetKills[rng.IntN(len(fleetKills))]
	// Slowed down (as the crash case slows apply) so that a kill lands
	// inside the rollout, not after it.
	res, err := c.killAt(kc, nil, &tk, rng, "fleet", "apply", file, "--progress", "always", "--qps", "20", "--burst", "1", "--parallelism", "1")
	if err != nil {
		return err
	}
	t.killed++
	if !res.killed {
		t.late++
	}
	if err := c.ok(kc, "fleet", "apply", file); err != nil {
		return fmt.Errorf("rerun after the kill (at %q): %w", tk.anchor, err)
	}
	if err := c.fleetConverged(dir, file, kc); err != nil {
		return err
	}
	t.converged++
	return nil
}

// fleetBed writes a fleet directory: the admin's kubeconfig, three
// targets' releases (3.0.0, each in its own namespace) and the fleet file.
func (c *campaign) fleetBed() (dir, file string, err error) {
	dir = filepath.Join(c.work, fmt.Sprintf("fleet-%d", c.serial.Add(1)))
	if err := os.MkdirAll(filepath.Join(dir, "kubeconfigs"), 0o755); err != nil {
		return "", "", err
	}
	kc, err := os.ReadFile(c.cp.AdminKubeconfig)
	if err != nil {
		return "", "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "kubeconfigs", "admin.yaml"), kc, 0o600); err != nil {
		return "", "", err
	}
	var b strings.Builder
	b.WriteString("schema: kubectl-ql3/fleet@v1\ntargets:\n")
	for i, ring := range []string{"one", "two", "two"} {
		ns, err := c.namespace("fleet")
		if err != nil {
			return "", "", err
		}
		src, err := c.release("v3.0.0", ns, "")
		if err != nil {
			return "", "", err
		}
		rel := filepath.Join(dir, "releases", fmt.Sprintf("t%d", i))
		if err := os.CopyFS(rel, os.DirFS(src)); err != nil {
			return "", "", err
		}
		_ = os.Remove(filepath.Join(rel, "ql3.lock.yaml"))
		fmt.Fprintf(&b, "- {name: t%d, labels: {ring: %s}, kubeconfig: kubeconfigs/admin.yaml, namespace: %s, release: releases/t%d}\n", i, ring, ns, i)
	}
	b.WriteString("waves:\n- {name: one, selector: {matchLabels: {ring: one}}}\n- {name: two, selector: {matchLabels: {ring: two}}}\n")
	file = filepath.Join(dir, "fleet.yaml")
	return dir, file, os.WriteFile(file, []byte(b.String()), 0o644)
}

// relabel sets every target release's version label to version.
func relabel(dir, version string) error {
	paths, err := filepath.Glob(filepath.Join(dir, "releases", "*", "kustomization.yaml"))
	if err != nil || len(paths) == 0 {
		return fmt.Errorf("relabel: %v (%d releases)", err, len(paths))
	}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := os.WriteFile(p, versionLabelRE.ReplaceAll(data, []byte("app.kubernetes.io/version: "+version)), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// fleetConverged: fleet status exits 0, every target's Head is committed
// at generation 2 with 3.0.1, and every target's receipts audit.
func (c *campaign) fleetConverged(dir, file, kc string) error {
	if err := c.ok(kc, "fleet", "status", file); err != nil {
		return fmt.Errorf("fleet status after the rerun: %w", err)
	}
	for i := range 3 {
		rdir := filepath.Join(dir, "receipts", fmt.Sprintf("t%d", i))
		if err := c.ok(kc, "receipt", "audit", rdir); err != nil {
			return fmt.Errorf("t%d: %w", i, err)
		}
		rs, err := filepath.Glob(filepath.Join(rdir, "*.receipt.json"))
		if err != nil || len(rs) != 2 {
			return fmt.Errorf("t%d: %d receipts %v, want 2 (install, the upgrade once)", i, len(rs), err)
		}
	}
	return nil
}
