package main

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
)

// caseRestart: kube-apiserver or etcd restarts in the middle of an apply
// (the plugin process, slowed down so the restart lands inside it). The
// apply either rides it out (exit 0) or says "unavailable" (exit 4); a
// rerun then converges.
func caseRestart(c *campaign, cs *caseState) []Row {
	var rows []Row
	for _, what := range []string{"kube-apiserver", "etcd"} {
		runs := c.runs(3, 1)
		row := Row{Case: "restart of " + what + " mid-apply", Runs: runs,
			Expected: "apply exits 0 or 4 (never 3 or 5); the rerun converges to one committed Head"}
		t0 := time.Now()
		converged, rode, unavailable := 0, 0, 0
		var where []string
		for i := 0; i < runs; i++ {
			code, at, err := c.restartRun(what, cs.rng(i+100*len(rows)))
			if err != nil {
				cs.failf("%s, run %d: %v [replay: -seed %d -case restart]", what, i, err, cs.seed)
				continue
			}
			converged++
			where = append(where, at)
			if code == 0 {
				rode++
			} else {
				unavailable++
			}
		}
		row.Observed = fmt.Sprintf("%d/%d converged (%d rode the restart out, %d exited 4 then rerun)", converged, runs, rode, unavailable)
		row.Pass = converged == runs
		row.Details = map[string]any{"restartedDuring": where}
		row.Seconds = time.Since(t0).Seconds()
		row.Failures = cs.failures()
		cs.fail, cs.nf = nil, 0
		rows = append(rows, row)
	}
	return rows
}

var restartAnchors = []string{"apply: acquired", "apply: stage 2", "server-side applied"}

func (c *campaign) restartRun(what string, rng *rand.Rand) (int, string, error) {
	ns, err := c.namespace("restart")
	if err != nil {
		return 0, "", err
	}
	rdir := filepath.Join(c.work, "receipts", ns)
	admin, err := c.adminOptions(rdir)
	if err != nil {
		return 0, "", err
	}
	dir, err := c.release("v3.0.0", ns, "")
	if err != nil {
		return 0, "", err
	}
	pf, err := c.preflight(admin, dir, deploy.TransitionInstall, deploy.ExpectedHead{})
	if err != nil {
		return 0, "", fmt.Errorf("preflight: %w", err)
	}
	_, kc, err := c.user("restarted", "system:masters")
	if err != nil {
		return 0, "", err
	}
	anchor := restartAnchors[rng.IntN(len(restartAnchors))]
	delay := time.Duration(rng.IntN(400)) * time.Millisecond
	restart := c.cp.RestartAPIServer
	if what == "etcd" {
		restart = c.cp.RestartEtcd
	}
	restarted := make(chan error, 1)
	var once sync.Once
	hook := func(line string) {
		if strings.Contains(line, anchor) {
			once.Do(func() {
				go func() {
					time.Sleep(delay)
					restarted <- restart()
				}()
			})
		}
	}
	res, err := c.watch(kc, hook, "apply", "--preflight", pf.Path, "--receipts-dir", rdir, "--parallelism", "2", "--qps", "20", "--burst", "1", "--timeout", "3m")
	if err != nil {
		return 0, "", err
	}
	at := fmt.Sprintf("%s +%s", anchor, delay)
	select {
	case err := <-restarted:
		if err != nil {
			return 0, at, fmt.Errorf("restart %s: %w", what, err)
		}
	case <-time.After(3 * time.Minute):
		return 0, at, fmt.Errorf("the restart never happened (anchor %q not printed?): %s", anchor, res.stderr)
	}
	if res.code != 0 && res.code != 4 {
		return res.code, at, fmt.Errorf("apply across the restart: exit %d, want 0 or 4: %s", res.code, res.stderr)
	}
	if res.code != 0 && errorLines(res.stderr) != 1 {
		return res.code, at, fmt.Errorf("apply across the restart: %d error lines: %s", errorLines(res.stderr), res.stderr)
	}
	h, err := c.head(ns)
	if err != nil {
		return res.code, at, err
	}
	verb := "apply"
	if h != nil && h.Phase == deploy.PhaseApplying && h.Transition.PreflightDigest == pf.Record.SelfDigest {
		verb = "resume"
	}
	if r := c.runBinary(kc, nil, verb, "--preflight", pf.Path, "--receipts-dir", rdir); r.code != 0 {
		return res.code, at, fmt.Errorf("rerun (%s) after the restart: exit %d: %s", verb, r.code, r.stderr)
	}
	if _, _, err := c.checkConverged(ns, pf.Record, 1, rdir); err != nil {
		return res.code, at, err
	}
	return res.code, at, nil
}

// watch runs the plugin and calls hook with every stderr line as it comes.
func (c *campaign) watch(kubeconfig string, hook func(string), args ...string) (procResult, error) {
	ch := make(chan string, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for l := range ch {
			hook(l)
		}
	}()
	res, err := c.stream(kubeconfig, nil, ch, nil, args...)
	<-done
	return res, err
}
