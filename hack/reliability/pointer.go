package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qinglong/kubectl-ql3/ceremony/package/intent"
	"github.com/qinglong/kubectl-ql3/ceremony/package/stagelayout/stagelayouttest"
	"github.com/qinglong/kubectl-ql3/internal/faults"
)

// The package active pointer rows (issue #14): racing activators with lost
// answers, a lost create settled by inspect, and tamper, all through the
// built binary against the real API server.

const pointerRepo = "registry.example.com/qinglong/packages/demo"

// pointerStage stages lock version under dir and writes its intent for ns
// as generation gen after prev (""), returning the activate arguments
// after the verb.
func (c *campaign) pointerStage(dir, ns, version string, gen int64, prev string) ([]string, intent.Intent, error) {
	lock := []byte(`{"package":"weather-tools","version":"` + version + `"}`)
	s, err := stagelayouttest.Write(filepath.Join(dir, "layout-"+version), stagelayouttest.Spec{Lock: lock})
	if err != nil {
		return nil, intent.Intent{}, err
	}
	key := filepath.Join(dir, "stage.pem")
	if err := os.WriteFile(key, stagelayouttest.PublicKeyPEM(stagelayouttest.Key(1)), 0o644); err != nil {
		return nil, intent.Intent{}, err
	}
	in := s.Intent()
	in.ClusterIdentity, in.Namespace, in.Generation = c.identity, ns, gen
	if prev != "" {
		in.PreviousLockDigest = &prev
	}
	data, _ := json.Marshal(in)
	f := filepath.Join(dir, "intent-"+version+".json")
	if err := os.WriteFile(f, data, 0o644); err != nil {
		return nil, intent.Intent{}, err
	}
	return []string{"--intent", f, "--layout", s.Dir, "--trusted-key", key, "--allow-ref", pointerRepo}, in, nil
}

// pointerProxy is a kubeconfig for a fresh user through a proxy that
// drops the answer to every pointer write when lose is set.
func (c *campaign) pointerProxy(dir, ns string, lose bool) (user, kubeconfig string, stop func(), err error) {
	user, kc, err := c.user("pkg", "system:masters")
	if err != nil {
		return "", "", nil, err
	}
	if !lose {
		return user, kc, func() {}, nil
	}
	cfg, err := c.restConfig(kc)
	if err != nil {
		return "", "", nil, err
	}
	f := faults.NewDrop(func(r *http.Request, _ []byte) bool {
		return (r.Method == http.MethodPost || r.Method == http.MethodPut) && strings.Contains(r.URL.Path, "/namespaces/"+ns+"/configmaps")
	})
	p, err := faults.NewProxy(cfg, f.Wrap)
	if err != nil {
		return "", "", nil, err
	}
	kc = filepath.Join(dir, user+".kubeconfig")
	return user, kc, p.Close, p.Kubeconfig(kc, ns)
}

// casePointer runs the three pointer rows.
func casePointer(c *campaign, cs *caseState) []Row {
	return []Row{c.pointerRace(cs), c.pointerLost(cs), c.pointerTamper(cs)}
}

// pointerRace: 8 activate processes, each its own user, every third
// losing its write's answer, for generation 1 then 2: exactly one winner
// per generation (exit 0, or exit 4 settled by inspect as active); the
// others conflict (3); no patch by anyone.
func (c *campaign) pointerRace(cs *caseState) Row {
	const n = 8
	runs := c.runs(4, 1)
	row := Row{Case: "package pointer: racing activators (8 processes, lost answers)", Runs: runs,
		Expected: "exactly 1 winner per generation; the rest exit 3, or 4 settled by inspect; no patch by any racer"}
	t0 := time.Now()
	var winners, conflicts, settled, other, patches int
	for run := 0; run < runs; run++ {
		ns, err := c.namespace("pkgrace")
		if err != nil {
			cs.failf("namespace: %v", err)
			continue
		}
		dir := filepath.Join(c.work, "pointer", ns)
		prev := ""
		for gen := int64(1); gen <= 2; gen++ {
			args := make([][]string, n)
			ins := make([]intent.Intent, n)
			kcs := make([]string, n)
			users := make([]string, n)
			for i := range n {
				a, in, err := c.pointerStage(dir, ns, fmt.Sprintf("%d.%d.0", gen, i), gen, prev)
				if err != nil {
					cs.failf("stage: %v", err)
					return row
				}
				u, kc, stop, err := c.pointerProxy(dir, ns, i%3 == 0)
				if err != nil {
					cs.failf("proxy: %v", err)
					return row
				}
				defer stop()
				args[i], ins[i], kcs[i], users[i] = a, in, kc, u
			}
			res := make([]procResult, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					res[i] = c.runBinary(kcs[i], nil, append([]string{"package", "activate"}, args[i]...)...)
				}()
			}
			wg.Wait()
			won := -1
			count := 0
			for i, r := range res {
				switch r.code {
				case 0:
					won, count = i, count+1
				case 3:
					conflicts++
				case 4:
					insp := c.runBinary(c.cp.AdminKubeconfig, nil, append([]string{"package", "inspect"}, args[i]...)...)
					switch insp.code {
					case 0:
						won, count = i, count+1
						settled++
					case 3:
						conflicts++
						settled++
					default:
						other++
						cs.failf("%s: inspect exit %d: %s", users[i], insp.code, insp.stderr)
					}
				default:
					other++
					cs.failf("%s: exit %d: %s", users[i], r.code, r.stderr)
				}
				evs, err := c.writes(users[i])
				if err != nil {
					cs.failf("audit: %v", err)
				}
				for _, e := range evs {
					if e.Verb == "patch" {
						patches++
					}
				}
			}
			winners += count
			if count != 1 {
				cs.failf("%s generation %d: %d winners", ns, gen, count)
				break
			}
			prev = ins[won].LockDigest
		}
	}
	row.Observed = fmt.Sprintf("%d winners for %d generations; %d conflicts, %d settled by inspect, %d other exits, %d patches", winners, 2*runs, conflicts, settled, other, patches)
	row.Pass = winners == 2*runs && other == 0 && patches == 0 && len(cs.failures()) == 0
	row.Details = map[string]any{"winners": winners, "generations": 2 * runs, "conflicts": conflicts, "settledByInspect": settled, "otherExits": other, "patches": patches}
	row.Seconds = time.Since(t0).Seconds()
	row.Failures = cs.failures()
	cs.fail, cs.nf = nil, 0
	return row
}

// pointerLost: the answer of the create (generation 1), then of the
// update (generation 2), lost: each time exit 4 naming inspect, inspect
// says active, activate replays; exactly one create and one update in the
// audit log.
func (c *campaign) pointerLost(cs *caseState) Row {
	runs := c.runs(6, 1)
	row := Row{Case: "package pointer: lost create and update answers", Runs: 2 * runs,
		Expected: "exit 4 naming inspect, no guess; inspect: active; activate again: replayed; exactly 1 create and 1 update"}
	t0 := time.Now()
	ok := 0
	for run := 0; run < runs; run++ {
		ns, err := c.namespace("pkglost")
		if err != nil {
			cs.failf("namespace: %v", err)
			continue
		}
		dir := filepath.Join(c.work, "pointer", ns)
		prev := ""
		for _, step := range []struct {
			gen     int64
			version string
			verb    string
		}{{1, "1.0.0", "create"}, {2, "1.1.0", "update"}} {
			args, in, err := c.pointerStage(dir, ns, step.version, step.gen, prev)
			if err != nil {
				cs.failf("stage: %v", err)
				break
			}
			u, kc, stop, err := c.pointerProxy(dir, ns, true)
			if err != nil {
				cs.failf("proxy: %v", err)
				break
			}
			r := c.runBinary(kc, nil, append([]string{"package", "activate"}, args...)...)
			stop()
			ins := c.runBinary(c.cp.AdminKubeconfig, nil, append([]string{"package", "inspect"}, args...)...)
			again := c.runBinary(c.cp.AdminKubeconfig, nil, append([]string{"package", "activate"}, args...)...)
			evs, _ := c.writes(u)
			writes := 0
			for _, e := range evs {
				if e.ObjectRef.Resource == "configmaps" {
					if e.Verb != step.verb {
						cs.failf("%s generation %d: a %s was sent", ns, step.gen, e.Verb)
					}
					writes++
				}
			}
			if r.code == 4 && strings.Contains(r.stderr, "package inspect") && ins.code == 0 && strings.Contains(ins.stdout, ": active") &&
				again.code == 0 && strings.Contains(again.stdout, ": replayed") && writes == 1 {
				ok++
			} else {
				cs.failf("%s generation %d: activate exit %d (%s), inspect exit %d, again exit %d %q, %d %s(s)", ns, step.gen, r.code, r.stderr, ins.code, again.code, again.stdout, writes, step.verb)
				break
			}
			prev = in.LockDigest
		}
	}
	row.Observed = fmt.Sprintf("%d of %d lost answers (create, then update) settled by inspect with one write each", ok, 2*runs)
	row.Pass = ok == 2*runs && len(cs.failures()) == 0
	row.Seconds = time.Since(t0).Seconds()
	row.Failures = cs.failures()
	cs.fail, cs.nf = nil, 0
	return row
}

// pointerTamper: a pointer changed outside activate, one class at a time:
// activate and inspect exit 5 and the ConfigMap keeps its resourceVersion.
func (c *campaign) pointerTamper(cs *caseState) Row {
	classes := []struct {
		name string
		edit func(cm *corev1.ConfigMap)
	}{
		{"extra label", func(cm *corev1.ConfigMap) { cm.Labels["team"] = "x" }},
		{"extra annotation", func(cm *corev1.ConfigMap) { cm.Annotations["note"] = "x" }},
		{"binaryData", func(cm *corev1.ConfigMap) { cm.BinaryData = map[string][]byte{"run": []byte("echo")} }},
		{"extra key", func(cm *corev1.ConfigMap) { cm.Data["run.sh"] = "echo" }},
		{"finalizer", func(cm *corev1.ConfigMap) { cm.Finalizers = []string{"example.com/hold"} }},
		{"active.json re-indented", func(cm *corev1.ConfigMap) { cm.Data[intent.ActiveKey] += "\n" }},
		{"label drift", func(cm *corev1.ConfigMap) { cm.Labels[intent.TargetLabel] = strings.Repeat("a", 52) }},
	}
	row := Row{Case: "package pointer: tamper", Runs: len(classes),
		Expected: "activate and inspect exit 5 for every class; the ConfigMap untouched"}
	t0 := time.Now()
	ok := 0
	ctx := context.Background()
	for _, tc := range classes {
		ns, err := c.namespace("pkgtamper")
		if err != nil {
			cs.failf("namespace: %v", err)
			continue
		}
		dir := filepath.Join(c.work, "pointer", ns)
		args, in, err := c.pointerStage(dir, ns, "1.0.0", 1, "")
		if err != nil {
			cs.failf("stage: %v", err)
			continue
		}
		if r := c.runBinary(c.cp.AdminKubeconfig, nil, append([]string{"package", "activate"}, args...)...); r.code != 0 {
			cs.failf("%s: activate exit %d: %s", tc.name, r.code, r.stderr)
			continue
		}
		nm, _ := intent.NamingOf(in)
		cms := c.admin.CoreV1().ConfigMaps(ns)
		cm, err := cms.Get(ctx, nm.Name, metav1.GetOptions{})
		if err == nil {
			tc.edit(cm)
			cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		}
		if err != nil {
			cs.failf("%s: edit: %v", tc.name, err)
			continue
		}
		a := c.runBinary(c.cp.AdminKubeconfig, nil, append([]string{"package", "activate"}, args...)...)
		i := c.runBinary(c.cp.AdminKubeconfig, nil, append([]string{"package", "inspect"}, args...)...)
		after, err := cms.Get(ctx, nm.Name, metav1.GetOptions{})
		if a.code == 5 && i.code == 5 && err == nil && after.ResourceVersion == cm.ResourceVersion {
			ok++
		} else {
			cs.failf("%s: activate exit %d, inspect exit %d, touched %v", tc.name, a.code, i.code, err != nil || after.ResourceVersion != cm.ResourceVersion)
		}
		if len(after.Finalizers) > 0 {
			after.Finalizers = nil
			_, _ = cms.Update(ctx, after, metav1.UpdateOptions{})
		}
	}
	row.Observed = fmt.Sprintf("%d of %d tamper classes failed closed (exit 5) with the ConfigMap untouched", ok, len(classes))
	row.Pass = ok == len(classes)
	row.Seconds = time.Since(t0).Seconds()
	row.Failures = cs.failures()
	cs.fail, cs.nf = nil, 0
	return row
}
