package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qinglong/kubectl-ql3/internal/testcluster"
)

// ChartReport is bench-chart.json: one Helm chart of the bench mix,
// installed then upgraded (every ConfigMap changed), by the ceremony — the
// chart vendored in a release under kustomize's helmCharts, `kubectl ql3
// lock` + `preflight` + `apply` (`head` untimed) — and by `helm upgrade
// --install --wait=watcher`, each in its own namespace, in one run.
type ChartReport struct {
	Date    string              `json:"date"`
	Machine Machine             `json:"machine"`
	Config  map[string]any      `json:"config"`
	QL3     map[string][3]*Proc `json:"ql3"`  // install, upgrade: lock, preflight, apply
	Helm    map[string]*Proc    `json:"helm"` // install, upgrade
	Ratios  map[string]float64  `json:"ratios"`
}

func chartMain(args []string) {
	fs := flag.NewFlagSet("chart", flag.ExitOnError)
	n := fs.Int("n", 1000, "objects the chart renders (the bench mix)")
	plugin := fs.String("plugin", "bin/kubectl-ql3", "the kubectl-ql3 binary")
	helm := fs.String("helm", "bin/tools/helm", "the helm binary")
	out := fs.String("out", "bench-chart.json", "results file")
	_ = fs.Parse(args)
	absPaths(plugin, helm)
	if err := benchChart(*n, *plugin, *helm, *out); err != nil {
		die(err)
	}
}

func benchChart(n int, plugin, helm, out string) error {
	cp, err := testcluster.Start(testcluster.Options{ControllerManager: true})
	if err != nil {
		return err
	}
	defer cp.Stop(false)
	work, err := os.MkdirTemp("", "ql3-bench-chart-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	env := append(cleanEnv(), "KUBECONFIG="+cp.AdminKubeconfig, "HELM_CACHE_HOME="+filepath.Join(work, "helm", "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(work, "helm", "config"), "HELM_DATA_HOME="+filepath.Join(work, "helm", "data"))
	for _, ns := range []string{"chart-ql3", "chart-helm"} {
		if _, err := cp.Clientset().CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	rep := &ChartReport{Date: time.Now().UTC().Format(time.RFC3339), QL3: map[string][3]*Proc{}, Helm: map[string]*Proc{},
		Machine: thisMachine("the control plane and the clients share the machine; ratios are measured in the same run"),
		Config: map[string]any{"n": n, "ql3": "kubectl ql3 lock DIR (--update); kubectl ql3 preflight; kubectl ql3 apply (the chart under helmCharts, rendered in-process)",
			"helm": "helm upgrade --install bench CHART -n NS --wait=watcher --timeout 5m"}}
	for rev, step := range []string{"install", "upgrade"} {
		if rep.QL3[step], err = chartQL3(env, plugin, work, n, rev+1, step); err != nil {
			return err
		}
		chart := filepath.Join(work, fmt.Sprintf("helm-%d", rev+1))
		if err := writeChart(chart, objects(n, "chart-helm", rev+1)); err != nil {
			return err
		}
		if rep.Helm[step], err = run(env, helm, "upgrade", "--install", "bench", chart, "-n", "chart-helm", "--wait=watcher", "--timeout", "5m"); err != nil {
			return fmt.Errorf("helm %s: %w", step, err)
		}
		q := rep.QL3[step]
		fmt.Fprintf(os.Stderr, "bench chart: %s: ql3 %.2fs (lock %.2f + preflight %.2f + apply %.2f), helm --wait %.2fs\n", step,
			q[0].Wall+q[1].Wall+q[2].Wall, q[0].Wall, q[1].Wall, q[2].Wall, rep.Helm[step].Wall)
	}
	rep.Ratios = map[string]float64{}
	for _, step := range []string{"install", "upgrade"} {
		q := rep.QL3[step]
		rep.Ratios[step+"VsHelmWait"] = round3((q[0].Wall + q[1].Wall + q[2].Wall) / rep.Helm[step].Wall)
	}
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	fmt.Printf("| chart of %d objects | kubectl-ql3 lock + preflight + apply | `helm upgrade --install --wait` | ratio |\n|---|---:|---:|---:|\n", n)
	for _, step := range []string{"install", "upgrade"} {
		q := rep.QL3[step]
		fmt.Printf("| %s | %.2f s | %.2f s | %.2f× |\n", step, q[0].Wall+q[1].Wall+q[2].Wall, rep.Helm[step].Wall, rep.Ratios[step+"VsHelmWait"])
	}
	return os.WriteFile(out, append(data, '\n'), 0o644)
}

// chartQL3 writes revision rev of the chart into the release, then locks,
// preflights and applies it.
func chartQL3(env []string, plugin, work string, n, rev int, step string) ([3]*Proc, error) {
	var out [3]*Proc
	dir := filepath.Join(work, "release")
	chart := filepath.Join(dir, "charts", "bench")
	_ = os.RemoveAll(chart)
	if err := writeChart(chart, objects(n, "chart-ql3", rev)); err != nil {
		return out, err
	}
	kust := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nhelmCharts:\n- name: bench\n  version: 1.0.0\n  releaseName: bench\n  namespace: chart-ql3\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kust), 0o644); err != nil {
		return out, err
	}
	var err error
	lock := []string{"lock", dir, "--version", fmt.Sprintf("1.0.%d", rev)}
	if rev > 1 {
		lock = append(lock, "--update")
	}
	if out[0], err = run(env, plugin, lock...); err != nil {
		return out, fmt.Errorf("lock: %w", err)
	}
	head, err := expectedHead(env, plugin, "chart-ql3")
	if err != nil {
		return out, err
	}
	pf := filepath.Join(work, fmt.Sprintf("pf-%d.json", rev))
	if out[1], err = run(env, plugin, "preflight", dir, "--transition", step, "--expected-head", head, "--out", pf); err != nil {
		return out, fmt.Errorf("preflight: %w", err)
	}
	if out[2], err = run(env, plugin, "apply", "--preflight", pf, "--receipts-dir", filepath.Join(work, "receipts")); err != nil {
		return out, fmt.Errorf("apply: %w", err)
	}
	return out, nil
}
