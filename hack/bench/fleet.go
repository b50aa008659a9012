package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qinglong/kubectl-ql3/internal/testcluster"
)

// fleetConfig is `bench fleet`: one release to many targets on several
// real API servers, by `kubectl ql3 fleet preflight` + `fleet apply`
// against the same per-target ceremony (`kubectl ql3 preflight` + `apply`)
// run by a sequential shell loop and by a parallel one (`xargs -P` of the
// same width), each on fresh targets, in one run; and the fleet driver's
// peak RSS at a second, larger number of targets.
type fleetConfig struct {
	clusters, targets, objects, width int
	rssTargets, rssObjects            int
	plugin, out, table                string
}

// FleetReport is bench-fleet.json.
type FleetReport struct {
	Date    string         `json:"date"`
	Machine Machine        `json:"machine"`
	Config  map[string]any `json:"config"`
	// Fleet is fleet preflight + fleet apply; Sequential and Parallel the
	// shell loops of preflight + apply per target.
	FleetPreflight *Proc `json:"fleetPreflight"`
	FleetApply     *Proc `json:"fleetApply"`
	Sequential     *Proc `json:"sequential"`
	Parallel       *Proc `json:"parallel"`
	// Large is fleet apply at rssTargets targets, for its peak RSS.
	LargePreflight *Proc              `json:"largePreflight,omitempty"`
	Large          *Proc              `json:"large,omitempty"`
	Ratios         map[string]float64 `json:"ratios"`
}

func fleetMain(args []string) {
	var c fleetConfig
	fs := flag.NewFlagSet("fleet", flag.ExitOnError)
	fs.IntVar(&c.clusters, "clusters", 3, "real API servers (each with its own etcd and controller manager)")
	fs.IntVar(&c.targets, "targets", 12, "targets (control namespaces, spread over the clusters)")
	fs.IntVar(&c.objects, "objects", 300, "objects per target (the bench mix)")
	fs.IntVar(&c.width, "width", 4, "the wave's maxParallel, fleet preflight's --parallel and xargs -P")
	fs.IntVar(&c.rssTargets, "rss-targets", 100, "targets of the driver's peak RSS run (0: skip)")
	fs.IntVar(&c.rssObjects, "rss-objects", 300, "objects per target of that run")
	fs.StringVar(&c.plugin, "plugin", "bin/kubectl-ql3", "the kubectl-ql3 binary")
	fs.StringVar(&c.out, "out", "bench-fleet.json", "results file")
	fs.StringVar(&c.table, "table", "", "also write the Markdown table here")
	_ = fs.Parse(args)
	absPaths(&c.plugin)
	if err := benchFleet(c); err != nil {
		die(err)
	}
}

// fleetBed is the control planes and the work directory.
type fleetBed struct {
	c    fleetConfig
	cps  []*testcluster.ControlPlane
	work string
	env  []string
}

func benchFleet(c fleetConfig) error {
	b := &fleetBed{c: c, env: cleanEnv()}
	defer func() {
		for _, cp := range b.cps {
			cp.Stop(false)
		}
	}()
	for i := range c.clusters {
		fmt.Fprintf(os.Stderr, "bench fleet: starting control plane %d of %d\n", i+1, c.clusters)
		cp, err := testcluster.Start(testcluster.Options{ControllerManager: true})
		if err != nil {
			return err
		}
		b.cps = append(b.cps, cp)
	}
	var err error
	if b.work, err = os.MkdirTemp("", "ql3-bench-fleet-"); err != nil {
		return err
	}
	defer os.RemoveAll(b.work)
	rep := &FleetReport{Date: time.Now().UTC().Format(time.RFC3339),
		Machine: thisMachine(fmt.Sprintf("%d cores shared by %d control planes and the clients; ratios are measured in the same run", runtime.NumCPU(), c.clusters)),
		Config: map[string]any{"clusters": c.clusters, "targets": c.targets, "objects": c.objects, "width": c.width,
			"rssTargets": c.rssTargets, "rssObjects": c.rssObjects,
			"fleet":      "kubectl ql3 fleet preflight F --parallel W; kubectl ql3 fleet apply F (one wave, maxParallel W)",
			"sequential": "for each target: kubectl ql3 preflight DIR --transition install --expected-head ql3h1-0-none --out PF && kubectl ql3 apply --preflight PF",
			"parallel":   "the same per target, by xargs -P W"}}
	if rep.FleetPreflight, rep.FleetApply, err = b.fleetRun("fleet", c.targets, c.objects); err != nil {
		return err
	}
	if rep.Sequential, err = b.loopRun("seq", 1); err != nil {
		return err
	}
	if rep.Parallel, err = b.loopRun("par", c.width); err != nil {
		return err
	}
	if c.rssTargets > 0 {
		if rep.LargePreflight, rep.Large, err = b.fleetRun("large", c.rssTargets, c.rssObjects); err != nil {
			return err
		}
	}
	rep.ratios()
	return rep.write(c)
}

func (rep *FleetReport) ratios() {
	fleet := rep.FleetPreflight.Wall + rep.FleetApply.Wall
	rep.Ratios = map[string]float64{
		"fleetVsParallel":   round3(fleet / rep.Parallel.Wall),
		"fleetVsSequential": round3(fleet / rep.Sequential.Wall),
	}
	if rep.Large != nil {
		rep.Ratios["largeRssVsFleetRss"] = round3(rep.Large.MaxRSSMiB / rep.FleetApply.MaxRSSMiB)
	}
}

func (rep *FleetReport) write(c fleetConfig) error {
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(c.out, append(data, '\n'), 0o644); err != nil {
		return err
	}
	table := rep.markdown(c)
	fmt.Print(table)
	if c.table != "" {
		return os.WriteFile(c.table, []byte(table), 0o644)
	}
	return nil
}

func (rep *FleetReport) markdown(c fleetConfig) string {
	var b strings.Builder
	fleet := rep.FleetPreflight.Wall + rep.FleetApply.Wall
	fmt.Fprintf(&b, "| %d targets × %d objects on %d API servers, width %d | wall s | driver peak RSS MiB | ratio |\n|---|---|---|---|\n", c.targets, c.objects, c.clusters, c.width)
	fmt.Fprintf(&b, "| `fleet preflight` + `fleet apply` | %.1f | %.0f | 1 |\n", fleet, max(rep.FleetPreflight.MaxRSSMiB, rep.FleetApply.MaxRSSMiB))
	fmt.Fprintf(&b, "| parallel loop (`xargs -P %d`, preflight + apply per target) | %.1f | – | fleet / loop = %.2f |\n", c.width, rep.Parallel.Wall, rep.Ratios["fleetVsParallel"])
	fmt.Fprintf(&b, "| sequential loop (preflight + apply per target) | %.1f | – | fleet / loop = %.2f |\n", rep.Sequential.Wall, rep.Ratios["fleetVsSequential"])
	if rep.Large != nil {
		fmt.Fprintf(&b, "| `fleet apply` of %d targets × %d objects | %.1f | %.0f | RSS / %d targets' = %.2f |\n", c.rssTargets, c.rssObjects, rep.LargePreflight.Wall+rep.Large.Wall, rep.Large.MaxRSSMiB, c.targets, rep.Ratios["largeRssVsFleetRss"])
	}
	return b.String()
}

// target is target i of a contender: its name, cluster and namespace.
func (b *fleetBed) target(who string, i int) (name string, cluster int, ns string) {
	return fmt.Sprintf("%s-%03d", who, i), i % len(b.cps), fmt.Sprintf("ql3f-%s-%03d", who, i)
}

// prepare writes, for n targets of contender who, the fleet directory:
// each cluster's kubeconfig, each target's release of objects, and the
// fleet file of one wave; creates the namespaces and locks every release
// by `fleet lock` (untimed: every contender deploys the same locks).
func (b *fleetBed) prepare(who string, n, perTarget int) (string, error) {
	dir := filepath.Join(b.work, who)
	var fleet strings.Builder
	fleet.WriteString("schema: kubectl-ql3/fleet@v1\ntargets:\n")
	for i, cp := range b.cps {
		data, err := os.ReadFile(cp.AdminKubeconfig)
		if err != nil {
			return "", err
		}
		if err := os.MkdirAll(filepath.Join(dir, "kubeconfigs"), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dir, "kubeconfigs", fmt.Sprintf("c%d.yaml", i)), data, 0o600); err != nil {
			return "", err
		}
	}
	for i := range n {
		name, cl, ns := b.target(who, i)
		ctx := context.Background()
		if _, err := b.cps[cl].Clientset().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return "", err
		}
		if err := writeRelease(filepath.Join(dir, "releases", name), ns, objects(perTarget, ns, 1)); err != nil {
			return "", err
		}
		fmt.Fprintf(&fleet, "- {name: %s, kubeconfig: kubeconfigs/c%d.yaml, namespace: %s, release: releases/%s}\n", name, cl, ns, name)
	}
	fmt.Fprintf(&fleet, "waves:\n- {name: all, selector: {names: [%s]}, maxParallel: %d}\n", strings.Join(b.names(who, n), ", "), b.c.width)
	file := filepath.Join(dir, "fleet.yaml")
	if err := os.WriteFile(file, []byte(fleet.String()), 0o644); err != nil {
		return "", err
	}
	fmt.Fprintf(os.Stderr, "bench fleet: %s: locking %d targets\n", who, n)
	if _, err := run(b.env, b.c.plugin, "fleet", "lock", file, "--version", "1.0.0", "--parallel", fmt.Sprint(b.c.width)); err != nil {
		return "", fmt.Errorf("%s: fleet lock: %w", who, err)
	}
	return file, nil
}

func (b *fleetBed) names(who string, n int) []string {
	var out []string
	for i := range n {
		name, _, _ := b.target(who, i)
		out = append(out, name)
	}
	return out
}

// fleetRun is fleet preflight + fleet apply of n fresh targets.
func (b *fleetBed) fleetRun(who string, n, perTarget int) (*Proc, *Proc, error) {
	file, err := b.prepare(who, n, perTarget)
	if err != nil {
		return nil, nil, err
	}
	fmt.Fprintf(os.Stderr, "bench fleet: %s: fleet preflight + apply of %d targets × %d objects\n", who, n, perTarget)
	pf, err := run(b.env, b.c.plugin, "fleet", "preflight", file, "--parallel", fmt.Sprint(b.c.width))
	if err != nil {
		return nil, nil, fmt.Errorf("%s: fleet preflight: %w", who, err)
	}
	ap, err := run(b.env, b.c.plugin, "fleet", "apply", file)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: fleet apply: %w", who, err)
	}
	return pf, ap, nil
}

// loopRun is the per-target ceremony of fresh targets run by a shell: one
// after another (width 1) or by xargs -P width.
func (b *fleetBed) loopRun(who string, width int) (*Proc, error) {
	file, err := b.prepare(who, b.c.targets, b.c.objects)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(file)
	var lines []string
	for i := range b.c.targets {
		name, cl, _ := b.target(who, i)
		lines = append(lines, fmt.Sprintf("%s c%d", name, cl))
	}
	one := `set -e; t=$1; c=$2; k=` + dir + `/kubeconfigs/$c.yaml; ` +
		`"$Q" preflight ` + dir + `/releases/$t --transition install --expected-head ql3h1-0-none --out ` + dir + `/$t.pf.json --kubeconfig "$k" 2>/dev/null; ` +
		`"$Q" apply --preflight ` + dir + `/$t.pf.json --receipts-dir ` + dir + `/receipts/$t --kubeconfig "$k" >/dev/null 2>&1`
	script := fmt.Sprintf("printf '%%s\\n' %s | xargs -P %d -L 1 bash -c '%s' _", shellWords(lines), width, one)
	fmt.Fprintf(os.Stderr, "bench fleet: %s: shell loop, width %d\n", who, width)
	p, err := run(append(b.env, "Q="+b.c.plugin), "bash", "-c", script)
	if err != nil {
		return nil, fmt.Errorf("%s: loop: %w", who, err)
	}
	return p, nil
}

func shellWords(lines []string) string {
	var q []string
	for _, l := range lines {
		q = append(q, "'"+l+"'")
	}
	return strings.Join(q, " ")
}
