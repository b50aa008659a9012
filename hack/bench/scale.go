package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/qinglong/kubectl-ql3/internal/testcluster"
	"github.com/qinglong/kubectl-ql3/inventory"
)

// ScaleReport is bench-scale.json: one release of the bench mix at N
// objects (10,000 by default) taken through the whole ceremony — install,
// status, diff, upgrade (every ConfigMap changed), rollback, retire of
// 1,000 ConfigMaps, receipt audit — by kubectl-ql3 in one namespace and by
// kubectl doing the same job in another, step by step in one run, the two
// alternating which goes first.
type ScaleReport struct {
	Date      string             `json:"date"`
	Machine   Machine            `json:"machine"`
	Config    map[string]any     `json:"config"`
	Lock      map[string]*Proc   `json:"lock"` // authoring, untimed against a peer
	Steps     []*ScaleStep       `json:"steps"`
	Audit     *Proc              `json:"receiptAudit"`
	HeadBytes map[string]int     `json:"headBytes"` // the Head ConfigMap as the API returns it, after each transition
	Ratios    map[string]float64 `json:"ratios"`
}

// ScaleStep is one step: the ceremony's processes and the peer's, each
// summed (wall and CPU add up, the peak RSS is the larger).
type ScaleStep struct {
	Name    string  `json:"name"`
	QL3     *Proc   `json:"ql3"`
	Kubectl *Proc   `json:"kubectl"`
	Peer    string  `json:"peer"`
	Ratio   float64 `json:"ratio"`
	RSS     float64 `json:"rssRatio"`
}

type scaleBed struct {
	*bencher
	n                  int
	plugin             string
	nsQ, nsK, receipts string
	dirs               [3]string // ql3 releases 1.0.0, 1.1.0, 1.2.0 (retire)
	files              [4]string // the same objects as one YAML stream each: 1.0.0, 1.1.0, the retired ones, 1.2.0
	rep                *ScaleReport
	first              bool
}

func scaleMain(args []string) {
	fs := flag.NewFlagSet("scale", flag.ExitOnError)
	n := fs.Int("n", 10000, "objects of the release (the bench mix)")
	plugin := fs.String("plugin", "bin/kubectl-ql3", "the kubectl-ql3 binary")
	kubectl := fs.String("kubectl", "bin/controlplane/kubectl", "the kubectl binary")
	out := fs.String("out", "bench-scale.json", "results file")
	until := fs.String("until", "", "stop after this step (install, status, diff, upgrade, rollback, retire); the receipt audit runs only when every step did")
	_ = fs.Parse(args)
	if *until != "" && !slices.Contains([]string{"install", "status", "diff", "upgrade", "rollback", "retire"}, *until) {
		die(fmt.Errorf("-until %q: not a step (install, status, diff, upgrade, rollback, retire)", *until))
	}
	absPaths(plugin, kubectl)
	if err := benchScale(*n, *plugin, *kubectl, *out, *until); err != nil {
		die(err)
	}
}

func benchScale(n int, plugin, kubectl, out, until string) error {
	cp, err := testcluster.Start(testcluster.Options{ControllerManager: true, ServiceCIDR: "10.96.0.0/16"})
	if err != nil {
		return err
	}
	defer cp.Stop(false)
	work, err := os.MkdirTemp("", "ql3-bench-scale-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	b := &scaleBed{n: n, plugin: plugin, nsQ: "scale-ql3", nsK: "scale-kubectl", receipts: filepath.Join(work, "receipts"),
		bencher: &bencher{c: config{kubectl: kubectl, cooldown: 15 * time.Second}, cp: cp, cs: cp.Clientset(), work: work,
			env: append(cleanEnv(), "KUBECONFIG="+cp.AdminKubeconfig)},
		rep: &ScaleReport{Date: time.Now().UTC().Format(time.RFC3339), Lock: map[string]*Proc{}, HeadBytes: map[string]int{}, Ratios: map[string]float64{},
			Machine: thisMachine("the control plane and the clients share the machine; ratios are measured in the same run"),
			Config:  map[string]any{"n": n, "retired": scaleRetired(n), "kubectl": "install, upgrade, rollback: kubectl apply --server-side -f FILE (the rendered objects: kubectl does not render), then kubectl rollout status deployment -l qinglong.io/role; status: kubectl get -f FILE -o json; diff (1.1.0 against 1.0.0 live): kubectl diff --server-side -f FILE; retire: kubectl apply --server-side -f FILE (1.2.0), then kubectl delete -f RETIRED (waits until gone)"}}}
	for _, ns := range []string{b.nsQ, b.nsK} {
		if err := b.createNamespace(ns); err != nil {
			return err
		}
	}
	if err := b.prepare(); err != nil {
		return err
	}
	for _, s := range b.steps() {
		if err := b.step(s); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		if err := b.save(out); err != nil {
			return err
		}
		if s.name == until {
			fmt.Print(b.rep.markdown())
			return nil
		}
	}
	if b.rep.Audit, err = run(b.env, plugin, "receipt", "audit", b.receipts); err != nil {
		return fmt.Errorf("receipt audit: %w", err)
	}
	fmt.Print(b.rep.markdown())
	return b.save(out)
}

// scaleRetired is how many ConfigMaps the retire step removes: 1,000 at
// 10,000 objects, a tenth of the release.
func scaleRetired(n int) int { return n / 10 }

// prepare writes the three releases and locks them (untimed, recorded):
// 1.0.0 (revision 1), 1.1.0 (every ConfigMap at revision 2), 1.2.0 (1.0.0
// without its first scaleRetired ConfigMaps: the rollback returns to 1.0.0).
func (b *scaleBed) prepare() error {
	drop := scaleRetired(b.n)
	v1q, v2q := objects(b.n, b.nsQ, 1), objects(b.n, b.nsQ, 2)
	v1k, v2k := objects(b.n, b.nsK, 1), objects(b.n, b.nsK, 2)
	for i, objs := range [][]map[string]any{v1q, v2q, v1q[drop:]} {
		version := fmt.Sprintf("1.%d.0", i)
		b.dirs[i] = filepath.Join(b.work, "release-"+version)
		if err := writeRelease(b.dirs[i], b.nsQ, objs); err != nil {
			return err
		}
		p, err := run(b.env, b.plugin, "lock", b.dirs[i], "--version", version)
		if err != nil {
			return err
		}
		b.rep.Lock[version] = p
	}
	for i, objs := range [][]map[string]any{v1k, v2k, v1k[:drop], v1k[drop:]} {
		b.files[i] = filepath.Join(b.work, fmt.Sprintf("kubectl-%d.yaml", i))
		if err := writeYAMLStream(b.files[i], objs); err != nil {
			return err
		}
	}
	return nil
}

type scaleStep struct {
	name, peer  string
	ql3, peerFn func() (*Proc, error)
	settle      bool
}

func (b *scaleBed) steps() []scaleStep {
	k := func(args ...string) func() (*Proc, error) {
		return func() (*Proc, error) { return run(b.env, b.c.kubectl, args...) }
	}
	applyWait := func(file string) func() (*Proc, error) {
		return func() (*Proc, error) {
			apply, err := run(b.env, b.c.kubectl, "apply", "--server-side", "-f", file)
			if err != nil {
				return nil, err
			}
			wait, err := run(b.env, b.c.kubectl, "rollout", "status", "deployment", "-l", "qinglong.io/role", "-n", b.nsK, "--timeout", "10m")
			if err != nil {
				return nil, err
			}
			return sumProcs(apply, wait), nil
		}
	}
	diff := func() (*Proc, error) {
		p, err := run(b.env, b.c.kubectl, "diff", "--server-side", "-f", b.files[1])
		if err != nil && strings.Contains(err.Error(), "exit status 1\n") { // 1: differences found
			return p, nil
		}
		return p, err
	}
	return []scaleStep{
		{"install", "apply + rollout status", b.transition(0, "install"), applyWait(b.files[0]), true},
		{"status", "get -o json", b.ql3("status", "-n", b.nsQ), k("get", "-f", b.files[0], "-o", "json"), false},
		{"diff", "diff --server-side", b.ql3("diff", b.dirs[1]), diff, false},
		{"upgrade", "apply + rollout status", b.transition(1, "upgrade"), applyWait(b.files[1]), true},
		{"rollback", "apply + rollout status", b.rollback, applyWait(b.files[0]), true},
		{"retire", fmt.Sprintf("apply of 1.2.0 + delete of the %d retired (waits until gone)", scaleRetired(b.n)), b.transition(2, "retire"), b.applyDelete, false},
	}
}

// applyDelete is what a kubectl user runs to move to 1.2.0, as the retire
// does: apply what remains, then delete the retired objects (kubectl
// delete waits until they are gone).
func (b *scaleBed) applyDelete() (*Proc, error) {
	apply, err := run(b.env, b.c.kubectl, "apply", "--server-side", "-f", b.files[3])
	if err != nil {
		return nil, err
	}
	del, err := run(b.env, b.c.kubectl, "delete", "-f", b.files[2])
	if err != nil {
		return nil, err
	}
	return sumProcs(apply, del), nil
}

func (b *scaleBed) ql3(args ...string) func() (*Proc, error) {
	return func() (*Proc, error) { return run(b.env, b.plugin, args...) }
}

// transition is preflight + apply of release i, from the Head read
// (untimed) just before.
func (b *scaleBed) transition(i int, transition string) func() (*Proc, error) {
	return func() (*Proc, error) {
		token, err := b.token()
		if err != nil {
			return nil, err
		}
		pf := filepath.Join(b.work, "pf-"+transition+".json")
		pre, err := run(b.env, b.plugin, "preflight", b.dirs[i], "--transition", transition, "--expected-head", token, "--out", pf)
		if err != nil {
			return nil, err
		}
		apply, err := run(b.env, b.plugin, "apply", "--preflight", pf, "--receipts-dir", b.receipts)
		if err != nil {
			return nil, err
		}
		return sumProcs(pre, apply), nil
	}
}

func (b *scaleBed) rollback() (*Proc, error) {
	token, err := b.token()
	if err != nil {
		return nil, err
	}
	return run(b.env, b.plugin, "rollback", b.dirs[0], "--expected-head", token, "--receipts-dir", b.receipts,
		"--out", filepath.Join(b.work, "pf-rollback.json"))
}

func (b *scaleBed) token() (string, error) { return expectedHead(b.env, b.plugin, b.nsQ) }

// step runs the ceremony and the peer, alternating which goes first, each
// followed (untimed) by the settle of every contender.
func (b *scaleBed) step(s scaleStep) error {
	st := &ScaleStep{Name: s.name, Peer: "kubectl " + s.peer}
	order := []func() error{
		func() (err error) { st.QL3, err = s.ql3(); return b.after(err, s.settle, b.nsQ) },
		func() (err error) { st.Kubectl, err = s.peerFn(); return b.after(err, s.settle, b.nsK) },
	}
	if b.first = !b.first; !b.first {
		order[0], order[1] = order[1], order[0]
	}
	for _, f := range order {
		if err := f(); err != nil {
			return err
		}
	}
	st.Ratio = round3(st.QL3.Wall / st.Kubectl.Wall)
	st.RSS = round3(st.QL3.MaxRSSMiB / st.Kubectl.MaxRSSMiB)
	b.rep.Steps = append(b.rep.Steps, st)
	b.rep.Ratios[s.name+"VsKubectl"], b.rep.Ratios[s.name+"RssVsKubectl"] = st.Ratio, st.RSS
	if err := b.headBytes(s.name); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "bench scale: %s: ql3 %.2fs %.0f MiB, kubectl %s %.2fs %.0f MiB (%.2f×, RSS %.2f×)\n", s.name,
		st.QL3.Wall, st.QL3.MaxRSSMiB, s.peer, st.Kubectl.Wall, st.Kubectl.MaxRSSMiB, st.Ratio, st.RSS)
	return nil
}

func (b *scaleBed) after(err error, settle bool, ns string) error {
	if err != nil || !settle {
		return err
	}
	return b.settle(ns)
}

func (b *scaleBed) headBytes(step string) error {
	raw, err := b.cs.CoreV1().RESTClient().Get().Namespace(b.nsQ).Resource("configmaps").Name(inventory.HeadName).DoRaw(context.Background())
	if err != nil {
		return fmt.Errorf("read the Head: %w", err)
	}
	b.rep.HeadBytes[step] = len(raw)
	return nil
}

func (b *scaleBed) save(out string) error {
	data, err := json.MarshalIndent(b.rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(out, append(data, '\n'), 0o644)
}

func (rep *ScaleReport) markdown() string {
	var s strings.Builder
	fmt.Fprintf(&s, "| %v objects | kubectl-ql3 | kubectl doing the same job | ratio | peak RSS (ql3 / kubectl) |\n|---|---:|---|---:|---:|\n", rep.Config["n"])
	for _, st := range rep.Steps {
		fmt.Fprintf(&s, "| %s | %.2f s | %s %.2f s | %.2f× | %.0f / %.0f MiB (%.2f×) |\n", st.Name, st.QL3.Wall, st.Peer, st.Kubectl.Wall,
			st.Ratio, st.QL3.MaxRSSMiB, st.Kubectl.MaxRSSMiB, st.RSS)
	}
	if rep.Audit == nil { // stopped early (-until): no chain to audit
		return s.String()
	}
	fmt.Fprintf(&s, "\nreceipt audit of the chain (install, upgrade, rollback, retire): %.2f s, %.0f MiB. Head ConfigMap as the API returns it: %d bytes at %v objects, %d after the retire\n",
		rep.Audit.Wall, rep.Audit.MaxRSSMiB, rep.HeadBytes["install"], rep.Config["n"], rep.HeadBytes["retire"])
	return s.String()
}
