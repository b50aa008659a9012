package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
)

// The named crash points of internal/crashpoint (QL3_CRASH_AT).
var crashPoints = []string{"acquired", "applied", "before-commit", "after-commit", "publish-before-link", "publish-after-link"}

// A timed kill: wait for a progress line that contains anchor (from the
// process start when empty), then a random delay up to maxDelay, then
// SIGKILL. A slow client (--qps, --parallelism) stretches the apply so the
// kills land inside it.
type timedKill struct {
	anchor   string
	maxDelay time.Duration
}

var timedKills = []timedKill{
	{"", 2500 * time.Millisecond},                   // anywhere: loading, identity, acquire, applies
	{"apply: acquired", 1500 * time.Millisecond},    // stage 1 (Namespace, CRD) and early stage 2
	{"apply: stage 2", 1500 * time.Millisecond},     // between and during object applies
	{"server-side applied", 800 * time.Millisecond}, // converging
	{"converge: ", 300 * time.Millisecond},          // final identity, Head commit
	{"commit: generation", 30 * time.Millisecond},   // receipt publish
}

// moment names where a killed apply was, from the last progress line it
// printed.
func moment(stderr string) string {
	last := ""
	for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
		if l != "" {
			last = l
		}
	}
	switch {
	case last == "":
		return "before any progress (loading, identity, Head read)"
	case strings.HasPrefix(last, "retire: "):
		return "during the retire's deletes"
	case strings.HasPrefix(last, "receipt: "):
		return "after the receipt was published"
	case strings.HasPrefix(last, "commit: "):
		return "after the commit, during receipt publish"
	case strings.HasPrefix(last, "converge: "):
		return "after convergence: final identity, Head commit"
	case strings.Contains(last, "server-side applied"):
		return "during convergence"
	case strings.HasPrefix(last, "apply: stage 2"):
		return "during and between object applies (stage 2)"
	case strings.HasPrefix(last, "apply: stage 1"):
		return "during object applies (stage 1: Namespace, CRD)"
	case strings.HasPrefix(last, "apply: acquired"), strings.HasPrefix(last, "resume: took over"):
		return "right after the Head acquire"
	default:
		return "before the Head acquire"
	}
}

type crashStats struct {
	mu      sync.Mutex
	moments map[string]int // by the last progress line before the kill
	how     map[string]int // by crash point, or "timed kill"
}

func (s *crashStats) add(m, how string) {
	s.mu.Lock()
	s.moments[m]++
	s.how[how]++
	s.mu.Unlock()
}

// caseCrashes: SIGKILL of the plugin at random moments of an apply and at
// every named crash point, then resume (or apply) until it converges.
func caseCrashes(c *campaign, cs *caseState) []Row {
	row := Row{Case: "crashes (SIGKILL)", Expected: "every run converges by resume/apply: one committed generation, auditable receipts"}
	want := c.runs(100, len(crashPoints)+2)
	stats := &crashStats{moments: map[string]int{}, how: map[string]int{}}
	var killed, converged, notKilled, doubles, resumed atomic.Int64
	// Runs are drawn until `want` processes were really killed (a timed
	// kill can come after the process finished), bounded.
	c.parallel(want*2, func(i int) {
		if killed.Load() >= int64(want) {
			return
		}
		k, resume, double, err := c.crashRun(i, cs.rng(i), stats)
		if double {
			doubles.Add(1)
		}
		if resume {
			resumed.Add(1)
		}
		if !k {
			notKilled.Add(1)
		} else {
			killed.Add(1)
		}
		if err != nil {
			cs.failf("run %d: %v [replay: -seed %d -case crash]", i, err, cs.seed)
			return
		}
		if k {
			converged.Add(1)
		}
	})
	row.Runs = int(killed.Load())
	row.Observed = fmt.Sprintf("%d/%d killed runs converged (%d by resume, %d recoveries killed too; %d timed kills came after the end, not counted)",
		converged.Load(), row.Runs, resumed.Load(), doubles.Load(), notKilled.Load())
	row.Pass = row.Runs >= want && converged.Load() == int64(row.Runs)
	if row.Runs < want {
		cs.failf("only %d of the %d wanted runs were killed", row.Runs, want)
	}
	row.Details = map[string]any{"killedAt": stats.moments, "killedBy": stats.how}
	// The retire half is its own row; this row's failures are its own.
	row.Failures = cs.failures()
	cs.fail, cs.nf = nil, 0
	return []Row{row, caseCrashRetire(c, cs)}
}

// crashRun is one run. killed says whether the apply was really killed,
// resumed whether the recovery was a resume, double whether a recovery was
// killed too.
func (c *campaign) crashRun(i int, rng *rand.Rand, stats *crashStats) (killed, resumed, double bool, err error) {
	ns, err := c.namespace("crash")
	if err != nil {
		return false, false, false, err
	}
	rdir := filepath.Join(c.work, "receipts", ns)
	admin, err := c.adminOptions(rdir)
	if err != nil {
		return false, false, false, err
	}
	dir, err := c.release("v3.0.0", ns, "")
	if err != nil {
		return false, false, false, err
	}
	kind, exp, gen := deploy.TransitionInstall, deploy.ExpectedHead{}, int64(1)
	if rng.IntN(4) == 0 { // a quarter are upgrades: the acquire is an update
		if _, err := c.deploy(admin, dir, deploy.TransitionInstall, deploy.ExpectedHead{}); err != nil {
			return false, false, false, fmt.Errorf("clean install: %w", err)
		}
		h, err := c.head(ns)
		if err != nil {
			return false, false, false, err
		}
		if dir, err = c.release("v3.1.0", ns, ""); err != nil {
			return false, false, false, err
		}
		kind, exp, gen = deploy.TransitionUpgrade, h.Expected(), 2
	}
	pf, err := c.preflight(admin, dir, kind, exp)
	if err != nil {
		return false, false, false, fmt.Errorf("preflight: %w", err)
	}
	// The first runs go through every named point in turn; the rest draw
	// a named point (one in four) or a timed kill.
	var env []string
	var tk *timedKill
	switch {
	case i < len(crashPoints):
		env = []string{"QL3_CRASH_AT=" + crashPoints[i]}
	case rng.IntN(4) == 0:
		env = []string{"QL3_CRASH_AT=" + crashPoints[rng.IntN(len(crashPoints))]}
	default:
		t := timedKills[rng.IntN(len(timedKills))]
		tk = &t
	}
	// A slow client stretches the apply so timed kills land inside it.
	slow := []string{"--parallelism", fmt.Sprint(1 + rng.IntN(4)), "--qps", fmt.Sprint(10 + rng.IntN(40)), "--burst", "1"}
	args := append([]string{"apply", "--preflight", pf.Path, "--receipts-dir", rdir}, slow...)
	_, kc, err := c.user("crasher", "system:masters")
	if err != nil {
		return false, false, false, err
	}
	res, err := c.killAt(kc, env, tk, rng, args...)
	if err != nil {
		return false, false, false, err
	}
	if !res.killed {
		if res.code != 0 {
			return false, false, false, fmt.Errorf("apply was not killed but exited %d: %s", res.code, res.stderr)
		}
		if len(env) > 0 {
			return false, false, false, fmt.Errorf("%s: the crash hook did not fire", env[0])
		}
		return false, false, false, nil
	}
	what := "timed kill"
	if len(env) > 0 {
		what = strings.TrimPrefix(env[0], "QL3_CRASH_AT=")
	}
	stats.add(moment(res.stderr), what)
	// Recover: resume an applying Head of this preflight, else apply
	// (a replay once committed). One recovery in five is killed as well.
	for attempt := 0; attempt < 3; attempt++ {
		h, err := c.head(ns)
		if err != nil {
			return true, false, double, fmt.Errorf("after %s: %v", what, err)
		}
		verb := "apply"
		if h != nil && h.Phase == deploy.PhaseApplying && h.Transition.PreflightDigest == pf.Record.SelfDigest {
			verb = "resume"
			resumed = true
		}
		_, kc, err := c.user("recoverer", "system:masters")
		if err != nil {
			return true, resumed, double, err
		}
		args := []string{verb, "--preflight", pf.Path, "--receipts-dir", rdir}
		if attempt == 0 && rng.IntN(5) == 0 {
			t := timedKill{"", time.Duration(200+rng.IntN(1500)) * time.Millisecond}
			r, err := c.killAt(kc, nil, &t, rng, append(args, "--qps", "20", "--burst", "1")...)
			if err != nil {
				return true, resumed, double, err
			}
			if r.killed {
				double = true
				continue
			}
			if r.code != 0 {
				return true, resumed, double, fmt.Errorf("after %s: %s: exit %d: %s", what, verb, r.code, r.stderr)
			}
			break
		}
		r := c.runBinary(kc, nil, args...)
		if r.code != 0 {
			return true, resumed, double, fmt.Errorf("after %s (%s): %s: exit %d: %s", what, moment(res.stderr), verb, r.code, r.stderr)
		}
		break
	}
	if _, _, err := c.checkConverged(ns, pf.Record, gen, rdir); err != nil {
		return true, resumed, double, fmt.Errorf("after %s (%s): %v", what, moment(res.stderr), err)
	}
	if r := c.runBinary(c.cp.AdminKubeconfig, nil, "receipt", "audit", rdir); r.code != 0 {
		return true, resumed, double, fmt.Errorf("after %s: receipt audit: exit %d: %s%s", what, r.code, r.stdout, r.stderr)
	}
	return true, resumed, double, nil
}

// killAt runs the plugin; with tk it SIGKILLs it after tk's anchor line and
// a random delay; with the crash hook in env it dies by itself.
func (c *campaign) killAt(kubeconfig string, env []string, tk *timedKill, rng *rand.Rand, args ...string) (procResult, error) {
	ch := make(chan string, 64)
	var proc *os.Process
	started := make(chan struct{})
	go func() {
		<-started
		if tk == nil {
			for range ch {
			}
			return
		}
		delay := time.Duration(rng.Int64N(int64(tk.maxDelay) + 1))
		found := tk.anchor == ""
		for !found {
			l, ok := <-ch
			if !ok {
				break
			}
			found = strings.Contains(l, tk.anchor)
		}
		if found {
			time.Sleep(delay)
			_ = proc.Kill()
		}
		for range ch {
		}
	}()
	return c.stream(kubeconfig, env, ch, func(p *os.Process) { proc = p; close(started) }, args...)
}
