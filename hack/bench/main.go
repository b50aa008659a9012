// Command bench measures the kubectl-ql3 ceremony on a local control plane
// (etcd, kube-apiserver and kube-controller-manager 1.37.2, started here)
// against bare `kubectl apply --server-side` and against a raw parallel
// client-go server-side apply loop (the lower bound), and against peers
// that wait until every object is Current as the ceremony does (kubectl
// apply -k + rollout status, helm --wait, kapp deploy: wait.go), in the
// same run, and writes bench.json and a Markdown table. `make bench` runs it.
//
//	go run ./hack/bench -n 100,1000,3000 -runs 3 -out bench.json
//
// Each (N, run) uses fresh namespaces and a fresh release of the issue #8
// mix (70% ConfigMaps of ~1 KiB, 10% Services, 10% ServiceAccounts, 10%
// Deployments with zero replicas). Every timed client is its own process:
// its wall time and peak RSS (wait4's ru_maxrss, through hack/bench/rusage)
// are measured from here.
//
// Subcommands: `bench scale` (one release of 10,000 objects through the
// whole ceremony against kubectl), `bench fleet`, `bench node`, `bench
// chart`, and `bench gen`, `bench raw`, `bench report`.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/qinglong/kubectl-ql3/internal/testcluster"
)

type config struct {
	ns           []int
	runs         int
	workers      []int
	plugin       string
	pluginBefore string
	kubectl      string
	helm         string
	kapp         string
	out          string
	tableOut     string
	renderN      int
	renderRuns   int
	audit        bool
	ql3Args      []string
	cpuProfiles  string
	keepWork     bool
	cooldown     time.Duration
	rotate       int
}

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "raw":
			rawMain(os.Args[2:])
			return
		case "gen":
			genMain(os.Args[2:])
			return
		case "report":
			reportMain(os.Args[2:])
			return
		case "fleet":
			fleetMain(os.Args[2:])
			return
		case "node":
			nodeMain(os.Args[2:])
			return
		case "chart":
			chartMain(os.Args[2:])
			return
		case "scale":
			scaleMain(os.Args[2:])
			return
		}
	}
	var c config
	var ns, workers, ql3Args string
	flag.StringVar(&ns, "n", envOr("BENCH_N", "100,1000,3000"), "object counts, comma-separated (env BENCH_N)")
	flag.IntVar(&c.runs, "runs", envInt("BENCH_RUNS", 3), "runs per object count; medians are reported (env BENCH_RUNS)")
	flag.StringVar(&workers, "workers", envOr("BENCH_RAW_WORKERS", "1,16,64"), "worker counts of the raw loop; the best is the lower bound")
	flag.StringVar(&c.plugin, "plugin", "bin/kubectl-ql3", "the kubectl-ql3 binary")
	flag.StringVar(&c.pluginBefore, "plugin-before", "", "also run the ceremony with this kubectl-ql3 binary (before/after in the same run)")
	flag.StringVar(&c.kubectl, "kubectl", "bin/controlplane/kubectl", "the kubectl binary")
	flag.StringVar(&c.helm, "helm", "", "also measure this helm (v4) binary: helm install, then helm upgrade (empty: skip)")
	flag.StringVar(&c.kapp, "kapp", "", "also measure this kapp binary: kapp deploy --wait=false, create then update (empty: skip)")
	flag.StringVar(&c.out, "out", "bench.json", "results file")
	flag.StringVar(&c.tableOut, "table", "", "also write the Markdown table here")
	flag.IntVar(&c.renderN, "render-n", envInt("BENCH_RENDER_N", 10000), "objects of the render benchmark: lock and lock verify vs kubectl kustomize (0: skip)")
	flag.IntVar(&c.renderRuns, "render-runs", envInt("BENCH_RENDER_RUNS", 1), "runs of the render benchmark (kubectl kustomize takes minutes at 10,000 objects)")
	flag.BoolVar(&c.audit, "audit", true, "run the 1,000-receipt chain audit benchmark")
	flag.StringVar(&ql3Args, "ql3-args", os.Getenv("BENCH_QL3_ARGS"), "extra flags for kubectl ql3 preflight and apply (e.g. --parallelism 32)")
	flag.StringVar(&c.cpuProfiles, "cpuprofile-dir", os.Getenv("BENCH_CPUPROFILE_DIR"), "write CPU profiles of the plugin's preflight and apply (last run of each N) here")
	flag.DurationVar(&c.cooldown, "cooldown", 15*time.Second, "pause after each contender's create, once the controllers are done with it (at least 150ms per Deployment)")
	flag.IntVar(&c.rotate, "rotate", envInt("BENCH_ROTATE", 0), "rotate the contenders' order by this many more places in every run (env BENCH_ROTATE; with -runs 1, 1 puts the ceremony last)")
	flag.BoolVar(&c.keepWork, "keep", false, "keep the work directory and the control plane's logs")
	flag.Parse()
	var err error
	if c.ns, err = ints(ns); err != nil {
		die(fmt.Errorf("-n: %w", err))
	}
	if c.workers, err = ints(workers); err != nil {
		die(fmt.Errorf("-workers: %w", err))
	}
	if c.rotate < 0 {
		die(fmt.Errorf("-rotate (BENCH_ROTATE): %d places: want 0 or more", c.rotate))
	}
	c.ql3Args = strings.Fields(ql3Args)
	absPaths(&c.plugin, &c.kubectl, &c.pluginBefore, &c.helm, &c.kapp)
	if c.cpuProfiles != "" {
		if c.cpuProfiles, err = filepath.Abs(c.cpuProfiles); err != nil {
			die(err)
		}
		_ = os.MkdirAll(c.cpuProfiles, 0o755)
	}
	if err := bench(c); err != nil {
		die(err)
	}
}

// Report is bench.json.
type Report struct {
	Date      string         `json:"date"`
	Command   string         `json:"command"`
	Machine   Machine        `json:"machine"`
	Config    map[string]any `json:"config"`
	Summary   []Summary      `json:"summary"`
	Runs      []*Run         `json:"runs"`
	Render    *RenderBench   `json:"render,omitempty"`
	Audit     *AuditBench    `json:"audit,omitempty"`
	Throttled []string       `json:"clientSideThrottling"`
}

type Machine struct {
	CPUs   int    `json:"cpus"`
	GOOS   string `json:"goos"`
	GOARCH string `json:"goarch"`
	Go     string `json:"go"`
	Note   string `json:"note"`
}

// Run is one (N, run): every scenario in the same minutes.
type Run struct {
	N     int    `json:"n"`
	Run   int    `json:"run"`
	Order string `json:"order"`

	LockInstall, LockUpgrade *Proc // informational: authoring, not deployment

	QL3 *QL3 `json:"ql3"`
	// QL3Before is the same ceremony run by -plugin-before, if given:
	// before/after figures measured in the same run.
	QL3Before *QL3 `json:"ql3Before,omitempty"`

	KubectlCreate *Proc `json:"kubectlCreate"`
	KubectlUpdate *Proc `json:"kubectlUpdate"`

	// Helm: `helm install` of a chart whose templates are the objects,
	// then `helm upgrade` to the changed ones (Helm 4's defaults: no --wait).
	HelmCreate *Proc `json:"helmInstall,omitempty"`
	HelmUpdate *Proc `json:"helmUpgrade,omitempty"`
	// kapp: `kapp deploy --wait=false` of the objects, then of the changed
	// ones. Without waiting kapp does less than the ceremony (which waits
	// for every object to be Current): the harder peer to beat.
	KappCreate *Proc `json:"kappCreate,omitempty"`
	KappUpdate *Proc `json:"kappUpdate,omitempty"`

	// Peers that wait, as the ceremony does, until every object is Current
	// (issue #18 part 3), each in its own namespace:
	//
	// KubectlWait: `kubectl apply --server-side -k DIR`, then `kubectl
	// rollout status deployment -l qinglong.io/role -n NS` (one Proc: the
	// two processes' wall and CPU times summed, the larger peak RSS).
	// Rollout status is kstatus's rule for Deployments, the one kind of the
	// mix that is not Current as soon as it exists (see waitingPeers).
	KubectlWaitCreate *Proc `json:"kubectlWaitCreate"`
	KubectlWaitUpdate *Proc `json:"kubectlWaitUpdate"`
	// HelmWait: `helm upgrade --install --wait=watcher` (Helm 4 waits with
	// kstatus).
	HelmWaitCreate *Proc `json:"helmWaitInstall,omitempty"`
	HelmWaitUpdate *Proc `json:"helmWaitUpgrade,omitempty"`
	// KappWait: `kapp deploy` with its default waiting.
	KappWaitCreate *Proc `json:"kappWaitCreate,omitempty"`
	KappWaitUpdate *Proc `json:"kappWaitUpdate,omitempty"`

	// RawCreate and RawUpdate by worker count: one process doing the
	// dry-run pass then the apply pass.
	RawCreate     map[int]*Proc      `json:"rawCreate"`
	RawUpdate     map[int]*Proc      `json:"rawUpdate"`
	RawPasses     map[string]float64 `json:"rawPasses"` // "create-16-dryRun": seconds inside the process
	RawBestCreate int                `json:"rawBestCreateWorkers"`
	RawBestUpdate int                `json:"rawBestUpdateWorkers"`

	Ratios map[string]float64 `json:"ratios"`
}

func bench(c config) error {
	start := time.Now()
	rep := &Report{
		Date:    start.UTC().Format(time.RFC3339),
		Command: "make bench BENCH_N=" + join(c.ns) + " BENCH_RUNS=" + strconv.Itoa(c.runs) + settings(c),
		Machine: thisMachine(fmt.Sprintf("%d cores shared by the control plane (etcd, kube-apiserver, kube-controller-manager) and the client, and by other work on the machine; ratios are measured in the same run", runtime.NumCPU())),
		Config: map[string]any{"n": c.ns, "runs": c.runs, "rawWorkers": c.workers, "ql3Args": c.ql3Args, "rotate": c.rotate,
			"kubectl": "kubectl apply --server-side -f <rendered file>", "serviceCIDR": "10.96.0.0/16",
			"helm": "helm install|upgrade bench <chart> -n <ns>", "kapp": "kapp deploy -a bench -f <file> -n <ns> --yes --wait=false",
			"kubectlWait": "kubectl apply --server-side -k <dir> -n <ns>; kubectl rollout status deployment -l qinglong.io/role -n <ns> --timeout 5m",
			"helmWait":    "helm upgrade --install bench <chart> -n <ns> --wait=watcher --timeout 5m",
			"kappWait":    "kapp deploy -a bench -f <file> -n <ns> --yes (default waiting)"},
		Throttled: []string{},
	}
	fmt.Fprintf(os.Stderr, "bench: starting the control plane\n")
	cp, err := testcluster.Start(testcluster.Options{ControllerManager: true, ServiceCIDR: "10.96.0.0/16"})
	if err != nil {
		return err
	}
	defer func() { cp.Stop(c.keepWork) }()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() { <-sig; cp.Stop(false); os.Exit(130) }()

	work, err := os.MkdirTemp("", "ql3-bench-")
	if err != nil {
		return err
	}
	if !c.keepWork {
		defer os.RemoveAll(work)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	b := &bencher{c: c, cp: cp, cs: cp.Clientset(), work: work, self: self,
		env: append(cleanEnv(), "KUBECONFIG="+cp.AdminKubeconfig)}
	for _, n := range c.ns {
		for r := 1; r <= c.runs; r++ {
			run, err := b.run(n, r)
			if err != nil {
				return fmt.Errorf("N=%d run %d: %w", n, r, err)
			}
			rep.Runs = append(rep.Runs, run)
			// Saved after every run: a later failure loses nothing
			// (`hack/bench report` re-derives the summaries and tables).
			if err := rep.save(c.out); err != nil {
				return err
			}
			q := run.QL3
			for _, p := range []*Proc{q.InstallPreflight, q.InstallApply, q.UpgradePreflight, q.UpgradeApply} {
				rep.Throttled = append(rep.Throttled, p.Throttled...)
			}
			fmt.Fprintf(os.Stderr, "bench: N=%d run %d: install %.2fs (kubectl %.2fs, raw %.2fs) upgrade %.2fs (kubectl %.2fs, raw %.2fs)\n", n, r,
				q.InstallPreflight.Wall+q.InstallApply.Wall, run.KubectlCreate.Wall, run.RawCreate[run.RawBestCreate].Wall,
				q.UpgradePreflight.Wall+q.UpgradeApply.Wall, run.KubectlUpdate.Wall, run.RawUpdate[run.RawBestUpdate].Wall)
		}
		rep.Summary = append(rep.Summary, summarize(n, rep.Runs))
	}
	if c.renderN > 0 {
		if rep.Render, err = b.renderBench(c.renderN); err != nil {
			return fmt.Errorf("render benchmark: %w", err)
		}
	}
	if c.audit {
		if rep.Audit, err = auditBench(); err != nil {
			return fmt.Errorf("audit benchmark: %w", err)
		}
	}
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(c.out, append(data, '\n'), 0o644); err != nil {
		return err
	}
	table := markdown(rep)
	fmt.Print(table)
	if c.tableOut != "" {
		if err := os.WriteFile(c.tableOut, []byte(table), 0o644); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "bench: done in %s; results in %s\n", time.Since(start).Round(time.Second), c.out)
	return nil
}

// settings is the command's make settings beyond N and runs: BENCH_ROTATE
// when set, and BENCH_HELM= / BENCH_KAPP= for a peer left out.
func settings(c config) string {
	var s string
	if c.rotate != 0 {
		s += " BENCH_ROTATE=" + strconv.Itoa(c.rotate)
	}
	if c.helm == "" {
		s += " BENCH_HELM="
	}
	if c.kapp == "" {
		s += " BENCH_KAPP="
	}
	return s
}

func (rep *Report) save(path string) error {
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// QL3 is one ceremony: install then upgrade, each preflight + apply.
type QL3 struct {
	InstallPreflight *Proc `json:"installPreflight"`
	InstallApply     *Proc `json:"installApply"`
	UpgradePreflight *Proc `json:"upgradePreflight"`
	UpgradeApply     *Proc `json:"upgradeApply"`
}

type bencher struct {
	c    config
	cp   *testcluster.ControlPlane
	cs   *kubernetes.Clientset
	work string
	self string
	env  []string
}

func (b *bencher) run(n, r int) (*Run, error) {
	tag := fmt.Sprintf("b%d-r%d", n, r)
	dir := filepath.Join(b.work, tag)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	run := &Run{N: n, Run: r, QL3: &QL3{}, RawCreate: map[int]*Proc{}, RawUpdate: map[int]*Proc{}, RawPasses: map[string]float64{}, Ratios: map[string]float64{}}
	nsK := tag + "-kubectl"
	nsR := func(w int) string { return fmt.Sprintf("%s-raw%d", tag, w) }
	nsH, nsKapp := tag+"-helm", tag+"-kapp"
	nsKW, nsHW, nsKappW := tag+"-kubectlw", tag+"-helmw", tag+"-kappw"
	all := []string{tag + "-ql3", nsK, nsKW}
	if b.c.helm != "" {
		all = append(all, nsH, nsHW)
	}
	if b.c.kapp != "" {
		all = append(all, nsKapp, nsKappW)
	}
	if b.c.pluginBefore != "" {
		run.QL3Before = &QL3{}
		all = append(all, tag+"-ql3before")
	}
	for _, w := range b.c.workers {
		all = append(all, nsR(w))
	}
	for _, ns := range all {
		if err := b.createNamespace(ns); err != nil {
			return nil, err
		}
	}
	defer b.deleteNamespaces(all)

	// Inputs, written and locked before anything is timed.
	ql3 := func(res *QL3, plugin, ns, label string) (create, update func() error, err error) {
		v1, v2 := filepath.Join(dir, label+"-1.0.0"), filepath.Join(dir, label+"-1.1.0")
		if err := writeRelease(v1, ns, objects(n, ns, 1)); err != nil {
			return nil, nil, err
		}
		if err := writeRelease(v2, ns, objects(n, ns, 2)); err != nil {
			return nil, nil, err
		}
		if run.LockInstall, err = run1(b.env, plugin, "lock", v1, "--version", "1.0.0"); err != nil {
			return nil, nil, err
		}
		if run.LockUpgrade, err = run1(b.env, plugin, "lock", v2, "--version", "1.1.0"); err != nil {
			return nil, nil, err
		}
		profile := func(phase string) []string {
			if b.c.cpuProfiles == "" || r != b.c.runs || plugin != b.c.plugin {
				return nil
			}
			return []string{"--cpuprofile", filepath.Join(b.c.cpuProfiles, fmt.Sprintf("n%d-%s.pprof", n, phase))}
		}
		receipts := filepath.Join(dir, label+"-receipts")
		var token string
		create = func() error {
			pf := filepath.Join(dir, label+"-install.json")
			args := append([]string{"preflight", v1, "--transition", "install", "--expected-head", "ql3h1-0-none", "--out", pf}, b.c.ql3Args...)
			if res.InstallPreflight, err = run1(b.env, plugin, append(args, profile("install-preflight")...)...); err != nil {
				return err
			}
			res.InstallPreflight.phases(preflightMarks)
			args = append([]string{"apply", "--preflight", pf, "--receipts-dir", receipts, "-o", "json"}, b.c.ql3Args...)
			if res.InstallApply, err = run1(b.env, plugin, append(args, profile("install-apply")...)...); err != nil {
				return err
			}
			res.InstallApply.phases(applyMarks)
			var out struct {
				ExpectedHead string `json:"expectedHead"`
			}
			if err := json.Unmarshal(res.InstallApply.stdout, &out); err != nil || out.ExpectedHead == "" {
				return fmt.Errorf("apply -o json: no expectedHead: %v: %s", err, res.InstallApply.stdout)
			}
			token = out.ExpectedHead
			err := b.settle(ns)
			return err
		}
		update = func() error {
			pf := filepath.Join(dir, label+"-upgrade.json")
			args := append([]string{"preflight", v2, "--transition", "upgrade", "--expected-head", token, "--out", pf}, b.c.ql3Args...)
			if res.UpgradePreflight, err = run1(b.env, plugin, append(args, profile("upgrade-preflight")...)...); err != nil {
				return err
			}
			res.UpgradePreflight.phases(preflightMarks)
			args = append([]string{"apply", "--preflight", pf, "--receipts-dir", receipts}, b.c.ql3Args...)
			if res.UpgradeApply, err = run1(b.env, plugin, append(args, profile("upgrade-apply")...)...); err != nil {
				return err
			}
			res.UpgradeApply.phases(applyMarks)
			return nil
		}
		return create, update, nil
	}
	qCreate, qUpdate, err := ql3(run.QL3, b.c.plugin, tag+"-ql3", "ql3")
	if err != nil {
		return nil, err
	}
	type step struct {
		name           string
		create, update func() error
	}
	steps := []step{{"ql3", qCreate, qUpdate}}

	k1, k2 := filepath.Join(dir, "kubectl-v1.yaml"), filepath.Join(dir, "kubectl-v2.yaml")
	if err := writeYAMLStream(k1, objects(n, nsK, 1)); err != nil {
		return nil, err
	}
	if err := writeYAMLStream(k2, objects(n, nsK, 2)); err != nil {
		return nil, err
	}
	steps = append(steps, step{"kubectl",
		func() (err error) {
			if run.KubectlCreate, err = run1(b.env, b.c.kubectl, "apply", "--server-side", "-f", k1); err != nil {
				return err
			}
			err = b.settle(nsK)
			return err
		},
		func() (err error) {
			run.KubectlUpdate, err = run1(b.env, b.c.kubectl, "apply", "--server-side", "-f", k2)
			return err
		}})

	if b.c.helm != "" {
		charts := [2]string{filepath.Join(dir, "helm-v1"), filepath.Join(dir, "helm-v2")}
		for i, chart := range charts {
			if err := writeChart(chart, objects(n, nsH, i+1)); err != nil {
				return nil, err
			}
		}
		helmEnv := append(slices.Clone(b.env), "HELM_CACHE_HOME="+filepath.Join(dir, "helm-home", "cache"),
			"HELM_CONFIG_HOME="+filepath.Join(dir, "helm-home", "config"), "HELM_DATA_HOME="+filepath.Join(dir, "helm-home", "data"))
		steps = append(steps, step{"helm",
			func() (err error) {
				if run.HelmCreate, err = peerRun(0, helmEnv, b.c.helm, "install", "bench", charts[0], "-n", nsH); err != nil {
					return err
				}
				err = b.settle(nsH)
				return err
			},
			func() (err error) {
				run.HelmUpdate, err = notRun(run.HelmCreate, func() (*Proc, error) { return peerRun(0, helmEnv, b.c.helm, "upgrade", "bench", charts[1], "-n", nsH) })
				return err
			}})
	}
	if b.c.kapp != "" {
		f1, f2 := filepath.Join(dir, "kapp-v1.yaml"), filepath.Join(dir, "kapp-v2.yaml")
		if err := writeYAMLStream(f1, objects(n, nsKapp, 1)); err != nil {
			return nil, err
		}
		if err := writeYAMLStream(f2, objects(n, nsKapp, 2)); err != nil {
			return nil, err
		}
		kapp := func(file string) []string {
			return []string{"deploy", "-a", "bench", "-f", file, "-n", nsKapp, "--yes", "--wait=false", "--tty=false"}
		}
		steps = append(steps, step{"kapp",
			func() (err error) {
				if run.KappCreate, err = peerRun(0, b.env, b.c.kapp, kapp(f1)...); err != nil {
					return err
				}
				err = b.settle(nsKapp)
				return err
			},
			func() (err error) {
				run.KappUpdate, err = notRun(run.KappCreate, func() (*Proc, error) { return peerRun(0, b.env, b.c.kapp, kapp(f2)...) })
				return err
			}})
	}

	waiting, err := b.waitingPeers(run, n, dir, nsKW, nsHW, nsKappW)
	if err != nil {
		return nil, err
	}
	for _, w := range waiting {
		steps = append(steps, step{w.name, w.create, w.update})
	}

	rawFile := func(w, rev int) string { return filepath.Join(dir, fmt.Sprintf("raw%d-v%d.json", w, rev)) }
	for _, w := range b.c.workers {
		for _, rev := range []int{1, 2} {
			if err := writeJSON(rawFile(w, rev), objects(n, nsR(w), rev)); err != nil {
				return nil, err
			}
		}
	}
	rawPass := func(kind string, rev int) error {
		for _, w := range b.c.workers {
			p, err := run1(b.env, b.self, "raw", "-file", rawFile(w, rev), "-workers", strconv.Itoa(w))
			if err != nil {
				return err
			}
			var res rawResult
			if err := json.Unmarshal(p.stdout, &res); err != nil {
				return fmt.Errorf("raw: %v: %s", err, p.stdout)
			}
			key := fmt.Sprintf("%s-%d", kind, w)
			run.RawPasses[key+"-dryRun"], run.RawPasses[key+"-apply"] = round3(res.DryRun), round3(res.Apply)
			if kind == "create" {
				run.RawCreate[w] = p
				if err := b.settle(nsR(w)); err != nil {
					return err
				}
			} else {
				run.RawUpdate[w] = p
			}
		}
		return nil
	}
	steps = append(steps, step{"raw", func() error { return rawPass("create", 1) }, func() error { return rawPass("update", 2) }})

	if run.QL3Before != nil {
		bCreate, bUpdate, err := ql3(run.QL3Before, b.c.pluginBefore, tag+"-ql3before", "ql3before")
		if err != nil {
			return nil, err
		}
		steps = append(steps, step{"ql3-before", bCreate, bUpdate})
	}

	// The order of the contenders rotates from run to run, so that none
	// always runs first (or right after the others' leftover work);
	// -rotate shifts it (a single run need not give the ceremony the
	// emptiest cluster).
	rot := (r - 1 + b.c.rotate) % len(steps)
	steps = append(steps[rot:], steps[:rot]...)
	var order []string
	for _, s := range steps {
		order = append(order, s.name)
	}
	run.Order = strings.Join(order, ",")
	for _, s := range steps {
		fmt.Fprintf(os.Stderr, "bench: N=%d run %d: %s create\n", n, r, s.name)
		if err := s.create(); err != nil {
			return nil, err
		}
	}
	for _, s := range steps {
		fmt.Fprintf(os.Stderr, "bench: N=%d run %d: %s update\n", n, r, s.name)
		if err := s.update(); err != nil {
			return nil, err
		}
	}
	run.RawBestCreate = bestWorkers(run.RawCreate)
	run.RawBestUpdate = bestWorkers(run.RawUpdate)
	run.computeRatios()
	return run, nil
}

// computeRatios fills run.Ratios from its measurements (also called by
// `hack/bench report` on a bench.json, so a report can be re-derived
// without re-running the clients).
func (run *Run) computeRatios() {
	run.Ratios = map[string]float64{} // afresh: a re-derived report keeps no ratio the code no longer gives
	q := run.QL3
	install := q.InstallPreflight.Wall + q.InstallApply.Wall
	upgrade := q.UpgradePreflight.Wall + q.UpgradeApply.Wall
	run.Ratios["installVsKubectl"] = round3(install / run.KubectlCreate.Wall)
	run.Ratios["installVsRaw"] = round3(install / run.RawCreate[run.RawBestCreate].Wall)
	run.Ratios["upgradeVsKubectl"] = round3(upgrade / run.KubectlUpdate.Wall)
	run.Ratios["upgradeVsRaw"] = round3(upgrade / run.RawUpdate[run.RawBestUpdate].Wall)
	run.Ratios["rssVsKubectl"] = round3(maxRSS(q.InstallPreflight, q.InstallApply, q.UpgradePreflight, q.UpgradeApply) /
		maxRSS(run.KubectlCreate, run.KubectlUpdate))
	// A peer that broke (could not do the job) has no ratio.
	ratio := func(key string, ql3 float64, peer *Proc) {
		if peer != nil && !peer.broke() {
			run.Ratios[key] = round3(ql3 / peer.Wall)
		}
	}
	ratio("installVsHelm", install, run.HelmCreate)
	ratio("upgradeVsHelm", upgrade, run.HelmUpdate)
	ratio("installVsKapp", install, run.KappCreate)
	ratio("upgradeVsKapp", upgrade, run.KappUpdate)
	// Against the peers that wait: kubectl + rollout status, and the
	// fastest of the waiting peers measured in this run.
	if run.KubectlWaitCreate != nil { // bench.json files before issue #18 have no waiting peers
		// A peer that did not finish (timed out) took at least its Wall: its
		// ratio is an upper bound, and it is not the fastest waiting peer.
		fastC, fastU := math.Inf(1), math.Inf(1)
		for _, w := range []struct {
			key            string
			create, update *Proc
		}{{"KubectlWait", run.KubectlWaitCreate, run.KubectlWaitUpdate}, {"HelmWait", run.HelmWaitCreate, run.HelmWaitUpdate}, {"KappWait", run.KappWaitCreate, run.KappWaitUpdate}} {
			if w.create == nil || w.update == nil {
				continue
			}
			ratio("installVs"+w.key, install, w.create)
			ratio("upgradeVs"+w.key, upgrade, w.update)
			if w.create.Failed == "" {
				fastC = min(fastC, w.create.Wall)
			}
			if w.update.Failed == "" {
				fastU = min(fastU, w.update.Wall)
			}
		}
		if !math.IsInf(fastC, 1) {
			run.Ratios["installVsFastestWaiting"] = round3(install / fastC)
		}
		if !math.IsInf(fastU, 1) {
			run.Ratios["upgradeVsFastestWaiting"] = round3(upgrade / fastU)
		}
		if kw := finished(run.KubectlWaitCreate, run.KubectlWaitUpdate); len(kw) > 0 {
			run.Ratios["rssVsKubectlWait"] = round3(maxRSS(q.InstallPreflight, q.InstallApply, q.UpgradePreflight, q.UpgradeApply) / maxRSS(kw...))
		}
	}
	if bq := run.QL3Before; bq != nil {
		run.Ratios["installVsBefore"] = round3(install / (bq.InstallPreflight.Wall + bq.InstallApply.Wall))
		run.Ratios["upgradeVsBefore"] = round3(upgrade / (bq.UpgradePreflight.Wall + bq.UpgradeApply.Wall))
	}
	// Issue #18: the ceremony's own client work, everything except the
	// render (the "render: … in D" line of preflight and apply) and, on an
	// install, the wait for kube-controller-manager after the last apply
	// (apply's converge phase), against the raw lower bound.
	run.Ratios["installClientVsRaw"] = round3(clientWork(q.InstallPreflight, q.InstallApply, true) / run.RawCreate[run.RawBestCreate].Wall)
	run.Ratios["upgradeClientVsRaw"] = round3(clientWork(q.UpgradePreflight, q.UpgradeApply, false) / run.RawUpdate[run.RawBestUpdate].Wall)
}

// clientWork is preflight + apply wall time less each process's render
// and, when controllerBound, less apply's converge phase.
func clientWork(preflight, apply *Proc, controllerBound bool) float64 {
	w := preflight.Wall + apply.Wall - preflight.renderSeconds() - apply.renderSeconds()
	if controllerBound {
		w -= apply.Phases["converge"]
	}
	return w
}

// renderSeconds is the duration the process reported on its "render: …
// in D" progress line (cache hit or render, lock verify excluded), or 0.
func (p *Proc) renderSeconds() float64 {
	for _, l := range p.Stderr {
		_, text, _ := strings.Cut(l, " ")
		if !strings.HasPrefix(text, "render: ") {
			continue
		}
		i := strings.LastIndex(text, " in ")
		if i < 0 {
			continue
		}
		if d, err := time.ParseDuration(text[i+4:]); err == nil {
			return d.Seconds()
		}
	}
	return 0
}

// run1 is run, callable inside (*bencher).run, where the local Run record
// is named run.
func run1(env []string, name string, args ...string) (*Proc, error) { return run(env, name, args...) }

func bestWorkers(m map[int]*Proc) int {
	best := -1
	for w, p := range m {
		if best < 0 || p.Wall < m[best].Wall || (p.Wall == m[best].Wall && w < best) {
			best = w
		}
	}
	return best
}

func maxRSS(ps ...*Proc) float64 {
	m := 0.0
	for _, p := range ps {
		m = max(m, p.MaxRSSMiB)
	}
	return m
}

func (b *bencher) createNamespace(ns string) error {
	_, err := b.cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	return err
}

// settle waits (untimed) until kube-controller-manager has observed every
// Deployment in ns, so that its leftover work does not run into the next
// measurement.
func (b *bencher) settle(ns string) error {
	start := time.Now()
	deadline := start.Add(5 * time.Minute)
	for {
		list, err := b.cs.AppsV1().Deployments(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		pending := 0
		for i := range list.Items {
			// A typed list's items carry no apiVersion and kind, without
			// which kstatus falls back to its generic rules and calls a
			// Deployment the controller has not seen yet Current.
			list.Items[i].APIVersion, list.Items[i].Kind = "apps/v1", "Deployment"
			u, err := kruntime.DefaultUnstructuredConverter.ToUnstructured(&list.Items[i])
			if err != nil {
				return err
			}
			res, err := status.Compute(&unstructured.Unstructured{Object: u})
			if err != nil || res.Status != status.CurrentStatus {
				pending++
			}
		}
		if pending == 0 {
			return b.quiesce(ns, len(list.Items))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("settle %s: %d Deployment(s) not observed after 5m", ns, pending)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// quiesce waits (untimed) until kube-controller-manager is done with the
// namespace beyond the Deployments: every ReplicaSet observed by the
// replicaset controller and an EndpointSlice for every Service, so that
// its leftover work (each controller's client is rate-limited to 20
// requests/s) does not slow the next contender's convergence.
func (b *bencher) quiesce(ns string, deployments int) error {
	ctx := context.Background()
	start := time.Now()
	deadline := start.Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		rss, err := b.cs.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		pending := 0
		for _, rs := range rss.Items {
			if rs.Status.ObservedGeneration < rs.Generation {
				pending++
			}
		}
		svcs, err := b.cs.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		slices, err := b.cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if pending == 0 && len(slices.Items) >= len(svcs.Items) {
			// And a fixed pause: contenders run right after one another
			// were measured to converge up to 3× slower without it.
			time.Sleep(max(b.c.cooldown, time.Duration(deployments)*150*time.Millisecond))
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("quiesce %s: controllers still busy after 5m", ns)
}

// deleteNamespaces deletes the run's namespaces and waits (untimed) until
// they are gone, so that the namespace controller's work does not run
// into the next measurement.
func (b *bencher) deleteNamespaces(names []string) {
	ctx := context.Background()
	for _, ns := range names {
		_ = b.cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	}
	deadline := time.Now().Add(10 * time.Minute)
	for _, ns := range names {
		for time.Now().Before(deadline) {
			if _, err := b.cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); apierrors.IsNotFound(err) {
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
}

func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KUBECONFIG=") {
			env = append(env, kv)
		}
	}
	return env
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func envInt(k string, def int) int {
	if v := os.Getenv(k); v != "" {
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
	}
	return def
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(strings.ReplaceAll(f, "_", ""))
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("empty list")
	}
	return out, nil
}

func join(ns []int) string {
	var s []string
	for _, n := range ns {
		s = append(s, strconv.Itoa(n))
	}
	return strings.Join(s, ",")
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
