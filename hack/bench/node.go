package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qinglong/kubectl-ql3/internal/testcluster"
	"github.com/qinglong/kubectl-ql3/internal/testkit"
)

// NodeReport is bench-node.json: the fixed cost of the ceremony on real
// pods. A release of one Deployment of 2 replicas of the test node's
// workload image (readiness probe every second), a Service and three
// zero-replica Deployments, upgraded run after run by switching the image
// between two locally built ones, by `kubectl ql3 preflight` + `apply`, by
// `kubectl ql3 preflight --apply` (one process) and by `kubectl apply
// --server-side -f` + `kubectl rollout status`, in turn (the order shifted
// by one each run), each in its own namespace.
type NodeReport struct {
	Date    string         `json:"date"`
	Machine Machine        `json:"machine"`
	Config  map[string]any `json:"config"`
	// Per run: the ceremony's preflight and apply, its preflight --apply,
	// the pair's apply and rollout status.
	Preflight []*Proc            `json:"preflight"`
	Apply     []*Proc            `json:"apply"`
	Once      []*Proc            `json:"once"`
	Kubectl   []*Proc            `json:"kubectl"`
	Rollout   []*Proc            `json:"rollout"`
	Medians   map[string]float64 `json:"medians"`
}

type nodeBed struct {
	cp      *testcluster.ControlPlane
	plugin  string
	kubectl string
	work    string
	env     []string
}

func nodeMain(args []string) {
	fs := flag.NewFlagSet("node", flag.ExitOnError)
	runs := fs.Int("runs", 5, "upgrades per contender")
	plugin := fs.String("plugin", "bin/kubectl-ql3", "the kubectl-ql3 binary")
	kubectl := fs.String("kubectl", "bin/controlplane/kubectl", "the kubectl binary")
	out := fs.String("out", "bench-node.json", "results file")
	report := fs.String("report", "", "re-derive the medians and tables of this results file, rewriting it, and run nothing")
	_ = fs.Parse(args)
	if *report != "" {
		if err := rederiveNode(*report); err != nil {
			die(err)
		}
		return
	}
	absPaths(plugin, kubectl)
	b := &nodeBed{env: cleanEnv(), plugin: *plugin, kubectl: *kubectl}
	if err := b.bench(*runs, *out); err != nil {
		die(err)
	}
}

func (b *nodeBed) bench(runs int, out string) error {
	fmt.Fprintf(os.Stderr, "bench node: starting the control plane and the node\n")
	cp, err := testcluster.Start(testcluster.Options{Node: true})
	if err != nil {
		return err
	}
	defer cp.Stop(false)
	b.cp, b.env = cp, append(b.env, "KUBECONFIG="+cp.AdminKubeconfig)
	if b.work, err = os.MkdirTemp("", "ql3-bench-node-"); err != nil {
		return err
	}
	defer os.RemoveAll(b.work)
	rep := &NodeReport{Date: time.Now().UTC().Format(time.RFC3339),
		Machine: thisMachine("the control plane, the node (kubelet, containerd, runc) and the clients share the machine; ratios are measured in the same run"),
		Config: map[string]any{"runs": runs, "release": "Deployment web (2 replicas, exec readiness probe every 1 s), a Service, three zero-replica Deployments",
			"ql3":     "kubectl ql3 head (untimed); kubectl ql3 preflight DIR --transition upgrade --expected-head TOKEN --out PF; kubectl ql3 apply --preflight PF",
			"once":    "kubectl ql3 head (untimed); kubectl ql3 preflight DIR --transition upgrade --expected-head TOKEN --out PF --apply",
			"kubectl": "kubectl apply --server-side -f FILE; kubectl rollout status deployment/web --timeout 5m"}}
	images := []string{cp.Image("ql3.local/workload:1"), cp.Image("ql3.local/workload:2")}
	for r := 0; r <= runs; r++ {
		var pf, ap, once, kc, ro *Proc
		contenders := []func(image string) error{
			func(image string) (err error) { pf, ap, err = b.ql3(r, image, false); return err },
			func(image string) (err error) { once, _, err = b.ql3(r, image, true); return err },
			func(image string) (err error) { kc, ro, err = b.pair(r, image); return err },
		}
		for i := range contenders {
			if err := contenders[(i+r)%len(contenders)](images[r%2]); err != nil {
				return err
			}
		}
		if r == 0 { // the install: not counted
			continue
		}
		for _, p := range []*Proc{ap, once} {
			if err := convergePhase(p); err != nil {
				return err
			}
		}
		rep.Preflight, rep.Apply, rep.Once = append(rep.Preflight, pf), append(rep.Apply, ap), append(rep.Once, once)
		rep.Kubectl, rep.Rollout = append(rep.Kubectl, kc), append(rep.Rollout, ro)
		fmt.Fprintf(os.Stderr, "bench node: upgrade %d: ql3 %.2fs (preflight %.2f + apply %.2f), preflight --apply %.2fs, kubectl + rollout status %.2fs\n",
			r, pf.Wall+ap.Wall, pf.Wall, ap.Wall, once.Wall, kc.Wall+ro.Wall)
	}
	return rep.save(out)
}

// rederiveNode recomputes the medians of the bench-node.json at path from
// its runs, rewrites it and prints the tables: a change to what the report
// computes needs no new run.
func rederiveNode(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var rep NodeReport
	if err := json.Unmarshal(data, &rep); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	n := len(rep.Apply)
	if n == 0 || len(rep.Preflight) != n || len(rep.Once) != n || len(rep.Kubectl) != n || len(rep.Rollout) != n {
		return fmt.Errorf("%s: want as many preflight, apply, once, kubectl and rollout runs, at least one (files before preflight --apply have no once): %d, %d, %d, %d, %d",
			path, len(rep.Preflight), n, len(rep.Once), len(rep.Kubectl), len(rep.Rollout))
	}
	for _, p := range slices.Concat(rep.Apply, rep.Once) {
		if _, ok := p.Phases["converge"]; ok {
			continue
		}
		// Saved before the phases were: from the stderr lines kept.
		if err := p.restamp(); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if err := convergePhase(p); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	return rep.save(path)
}

// save computes the medians, writes the report to out and prints its
// tables.
func (rep *NodeReport) save(out string) error {
	rep.medians()
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	runs := len(rep.Apply)
	m := rep.Medians
	fmt.Printf("| upgrade of a 2-replica Deployment on the node, median of %d | s | ratio (%.1f%% interval) |\n|---|---|---|\n| `kubectl ql3 preflight` + `apply` | %.2f (%.2f + %.2f) | %.2f× (%.2f–%.2f; apply alone %.2f×) |\n| `kubectl ql3 preflight --apply` | %.2f | %.2f× (%.2f–%.2f) |\n| `kubectl apply --server-side` + `rollout status` | %.2f | |\n",
		runs, 100*m["intervalCoverage"], m["ql3"], m["preflight"], m["apply"], m["ratio"], m["ratioLow"], m["ratioHigh"], m["applyRatio"], m["once"], m["onceRatio"], m["onceRatioLow"], m["onceRatioHigh"], m["kubectl"])
	fmt.Printf("\n| time besides the rollout, median of %d | s | ratio to `kubectl apply` alone |\n|---|---|---|\n| `kubectl ql3 preflight` + `apply` | %.2f | %.2f× |\n| `kubectl ql3 preflight --apply` | %.2f | %.2f× |\n| `kubectl apply --server-side` | %.2f | |\n",
		runs, m["ql3Own"], m["ownRatio"], m["onceOwn"], m["onceOwnRatio"], m["kubectlApply"])
	return os.WriteFile(out, append(data, '\n'), 0o644)
}

func (rep *NodeReport) medians() {
	var q, p, a, o, k, ratio, applyRatio, onceRatio []float64
	for i := range rep.Apply {
		ql3, kc := rep.Preflight[i].Wall+rep.Apply[i].Wall, rep.Kubectl[i].Wall+rep.Rollout[i].Wall
		q, p, a, k = append(q, ql3), append(p, rep.Preflight[i].Wall), append(a, rep.Apply[i].Wall), append(k, kc)
		o, onceRatio = append(o, rep.Once[i].Wall), append(onceRatio, rep.Once[i].Wall/kc)
		ratio, applyRatio = append(ratio, ql3/kc), append(applyRatio, rep.Apply[i].Wall/kc)
	}
	// Unrounded: the tables round once, to two places (a value rounded to
	// three first, 0.8747 to 0.875, would print as 0.88).
	rep.Medians = map[string]float64{"ql3": median(q), "preflight": median(p), "apply": median(a),
		"once": median(o), "onceRatio": median(onceRatio),
		"kubectl": median(k), "ratio": median(ratio), "applyRatio": median(applyRatio)}
	rep.Medians["ratioLow"], rep.Medians["ratioHigh"], rep.Medians["intervalCoverage"] = medianInterval(ratio)
	rep.Medians["onceRatioLow"], rep.Medians["onceRatioHigh"], _ = medianInterval(onceRatio)
	rep.ownTime()
}

// medianInterval is a 95% confidence interval of the median of xs (the
// per-run ratios), free of any assumption about their distribution but
// that the runs are independent: with the values sorted, x(k) to x(n+1-k)
// for the largest k at which P(Binomial(n, 1/2) <= k-1) is at most 2.5%
// (for 25 runs, x(8) to x(18)); coverage is the probability it holds the
// median, 1 - 2 P(B <= k-1) (95.7% for 25 runs, 97.3% for 60). With fewer
// than 6 runs no k reaches 95%: the interval is the whole range, and its
// coverage less (93.75% for 5). The rollouts, paced by the readiness probe,
// make one run's ratio vary by ±50%; the interval says whether a median
// under 1.0 is more than that noise.
func medianInterval(xs []float64) (lo, hi, coverage float64) {
	n := len(xs)
	if n == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	p0 := math.Pow(0.5, float64(n))
	k, cdf, p := 0, 0.0, p0 // p = P(B = j), from j = 0
	for j := 0; j < n; j++ {
		if cdf+p > 0.025 {
			break
		}
		cdf, k = cdf+p, j+1
		p = p * float64(n-j) / float64(j+1)
	}
	if k == 0 {
		k, cdf = 1, p0
	}
	return s[k-1], s[n-k], 1 - 2*cdf
}

// ownTime adds the medians of each contender's time besides the rollout,
// which the readiness probe's 1-second period makes vary by a second from
// run to run: for the ceremony, its wall time less its converge phase
// (convergePhase); for the pair, `kubectl apply` alone — less than the pair's own
// time, as rollout status's process start and exit are left in the
// rollout. Ratios per run, then the median.
func (rep *NodeReport) ownTime() {
	var q, o, k, qr, or []float64
	for i := range rep.Apply {
		ql3 := rep.Preflight[i].Wall + rep.Apply[i].Wall - rep.Apply[i].Phases["converge"]
		once, kc := rep.Once[i].Wall-rep.Once[i].Phases["converge"], rep.Kubectl[i].Wall
		q, o, k = append(q, ql3), append(o, once), append(k, kc)
		qr, or = append(qr, ql3/kc), append(or, once/kc)
	}
	for name, v := range map[string][]float64{"ql3Own": q, "onceOwn": o, "kubectlApply": k, "ownRatio": qr, "onceOwnRatio": or} {
		rep.Medians[name] = median(v)
	}
}

// convergePhase splits an apply's time into applyMarks' phases; its
// "converge" phase, from the objects applied to converge reading them
// Current, is the rollout as the ceremony saw it. A run whose progress
// lines lack either end is an error, not a wrong span.
func convergePhase(p *Proc) error {
	p.phases(applyMarks)
	if _, ok := p.Phases["apply"]; !ok {
		return fmt.Errorf("bench node: no \"server-side applied\" progress line among its %d", len(p.lines))
	}
	if _, ok := p.Phases["converge"]; !ok {
		return fmt.Errorf("bench node: no \"current\" progress line among its %d", len(p.lines))
	}
	return nil
}

// release writes the release of run r into dir for namespace ns.
func nodeRelease(dir, ns, image string, r int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	kust := fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: %s\nresources:\n- web.yaml\n", ns)
	web := testkit.WorkloadDeployment("web", "control", 2, image) + "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  selector: {app.kubernetes.io/name: web}\n  ports: [{name: http, port: 80, targetPort: http}]\n"
	for _, role := range []string{"admin", "control-ai", "worker"} {
		web += "---\n" + testkit.WorkloadDeployment(role, role, 0, image)
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kust), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "web.yaml"), []byte(web), 0o644)
}

func (b *nodeBed) namespace(ns string) error {
	_, err := b.cp.Clientset().CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	return err
}

// ql3 is run r of the ceremony: lock (untimed), head (untimed), then the
// timed preflight and apply, or (once) the timed preflight --apply alone;
// run 0 installs.
func (b *nodeBed) ql3(r int, image string, once bool) (*Proc, *Proc, error) {
	ns := map[bool]string{false: "ql3-node-ql3", true: "ql3-node-once"}[once]
	if r == 0 {
		if err := b.namespace(ns); err != nil {
			return nil, nil, err
		}
	}
	dir := filepath.Join(b.work, fmt.Sprintf("%s-%d", ns, r))
	if err := nodeRelease(dir, ns, image, r); err != nil {
		return nil, nil, err
	}
	version := fmt.Sprintf("1.0.%d", r)
	if _, err := run(b.env, b.plugin, "lock", dir, "--version", version); err != nil {
		return nil, nil, fmt.Errorf("lock: %w", err)
	}
	head, err := expectedHead(b.env, b.plugin, ns)
	if err != nil {
		return nil, nil, err
	}
	transition := map[bool]string{true: "install", false: "upgrade"}[r == 0]
	pfPath, rdir := filepath.Join(dir, "pf.json"), filepath.Join(b.work, ns+"-receipts")
	if once {
		pf, err := run(b.env, b.plugin, "preflight", dir, "--transition", transition, "--expected-head", head, "--out", pfPath, "--apply", "--receipts-dir", rdir)
		if err != nil {
			return nil, nil, fmt.Errorf("preflight --apply: %w", err)
		}
		return pf, nil, nil
	}
	pf, err := run(b.env, b.plugin, "preflight", dir, "--transition", transition, "--expected-head", head, "--out", pfPath)
	if err != nil {
		return nil, nil, fmt.Errorf("preflight: %w", err)
	}
	ap, err := run(b.env, b.plugin, "apply", "--preflight", pfPath, "--receipts-dir", rdir)
	if err != nil {
		return nil, nil, fmt.Errorf("apply: %w", err)
	}
	return pf, ap, nil
}

// pair is run r of kubectl apply --server-side + rollout status.
func (b *nodeBed) pair(r int, image string) (*Proc, *Proc, error) {
	ns := "ql3-node-kubectl"
	if r == 0 {
		if err := b.namespace(ns); err != nil {
			return nil, nil, err
		}
	}
	dir := filepath.Join(b.work, fmt.Sprintf("kubectl-%d", r))
	if err := nodeRelease(dir, ns, image, r); err != nil {
		return nil, nil, err
	}
	rendered, err := run(b.env, b.kubectl, "kustomize", dir)
	if err != nil {
		return nil, nil, err
	}
	file := filepath.Join(dir, "rendered.yaml")
	if err := os.WriteFile(file, rendered.stdout, 0o644); err != nil {
		return nil, nil, err
	}
	kc, err := run(b.env, b.kubectl, "apply", "--server-side", "-f", file)
	if err != nil {
		return nil, nil, err
	}
	ro, err := run(b.env, b.kubectl, "rollout", "status", "deployment/web", "-n", ns, "--timeout", "5m")
	if err != nil {
		return nil, nil, err
	}
	return kc, ro, nil
}
