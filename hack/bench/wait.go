package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// waitingPeer is one contender that waits, as the ceremony's apply does,
// until every object is Current (issue #18 part 3).
type waitingPeer struct {
	name           string
	create, update func() error
}

// waitingPeers are the peers doing the ceremony's whole job on the same
// objects: write, then wait until every object is Current.
//
//   - kubectl: `kubectl apply --server-side -k DIR` (kubectl renders the
//     kustomization too), then `kubectl rollout status deployment -l
//     qinglong.io/role -n NS`. In the bench mix (gen.go) ConfigMaps,
//     ServiceAccounts and ClusterIP Services are Current under kstatus as
//     soon as they exist, which the apply's answer already proves;
//     Deployments are the one kind that waits for a controller. Rollout
//     status waits for what kstatus checks of a Deployment: the status
//     observed the latest generation, and the updated, total and available
//     replicas agree with the spec. `kubectl wait --for=condition=Available`
//     was not chosen: on an upgrade it accepts the Available condition the
//     controller wrote for the previous generation.
//   - helm: `helm upgrade --install --wait=watcher` (Helm 4's kstatus
//     watcher; --install makes the first run an install).
//   - kapp: `kapp deploy` with its default waiting (every resource until
//     kapp considers it reconciled).
//
// Each runs in its own namespace; its create is followed, untimed, by the
// same settle as every contender's.
func (b *bencher) waitingPeers(run *Run, n int, dir, nsKubectl, nsHelm, nsKapp string) ([]waitingPeer, error) {
	var peers []waitingPeer
	kDirs := [2]string{filepath.Join(dir, "kubectlw-v1"), filepath.Join(dir, "kubectlw-v2")}
	for i, d := range kDirs {
		if err := writeRelease(d, nsKubectl, objects(n, nsKubectl, i+1)); err != nil {
			return nil, err
		}
	}
	kubectlWait := func(d string) (*Proc, error) {
		apply, err := run1(b.env, b.c.kubectl, "apply", "--server-side", "-k", d)
		if err != nil {
			return nil, err
		}
		rollout, err := peerRun(peerTimeout, b.env, b.c.kubectl, "rollout", "status", "deployment", "-l", "qinglong.io/role", "-n", nsKubectl, "--timeout", "5m")
		if err != nil {
			return nil, err
		}
		p := sumProcs(apply, rollout)
		p.Failed, p.Broke = rollout.Failed, rollout.Broke
		return p, nil
	}
	peers = append(peers, waitingPeer{"kubectl+wait",
		func() (err error) {
			if run.KubectlWaitCreate, err = kubectlWait(kDirs[0]); err != nil {
				return err
			}
			err = b.settle(nsKubectl)
			return err
		},
		func() (err error) {
			run.KubectlWaitUpdate, err = notRun(run.KubectlWaitCreate, func() (*Proc, error) { return kubectlWait(kDirs[1]) })
			return err
		}})

	if b.c.helm != "" {
		charts := [2]string{filepath.Join(dir, "helmw-v1"), filepath.Join(dir, "helmw-v2")}
		for i, chart := range charts {
			if err := writeChart(chart, objects(n, nsHelm, i+1)); err != nil {
				return nil, err
			}
		}
		home := filepath.Join(dir, "helmw-home")
		env := append(slices.Clone(b.env), "HELM_CACHE_HOME="+filepath.Join(home, "cache"),
			"HELM_CONFIG_HOME="+filepath.Join(home, "config"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
		helm := func(chart string) []string {
			return []string{"upgrade", "--install", "bench", chart, "-n", nsHelm, "--wait=watcher", "--timeout", "5m"}
		}
		peers = append(peers, waitingPeer{"helm+wait",
			func() (err error) {
				if run.HelmWaitCreate, err = peerRun(peerTimeout, env, b.c.helm, helm(charts[0])...); err != nil {
					return err
				}
				err = b.settle(nsHelm)
				return err
			},
			func() (err error) {
				run.HelmWaitUpdate, err = notRun(run.HelmWaitCreate, func() (*Proc, error) { return peerRun(peerTimeout, env, b.c.helm, helm(charts[1])...) })
				return err
			}})
	}
	if b.c.kapp != "" {
		files := [2]string{filepath.Join(dir, "kappw-v1.yaml"), filepath.Join(dir, "kappw-v2.yaml")}
		for i, f := range files {
			if err := writeYAMLStream(f, objects(n, nsKapp, i+1)); err != nil {
				return nil, err
			}
		}
		kapp := func(file string) []string {
			return []string{"deploy", "-a", "bench", "-f", file, "-n", nsKapp, "--yes", "--tty=false", "--wait-timeout", "5m"}
		}
		peers = append(peers, waitingPeer{"kapp+wait",
			func() (err error) {
				if run.KappWaitCreate, err = peerRun(peerTimeout, b.env, b.c.kapp, kapp(files[0])...); err != nil {
					return err
				}
				err = b.settle(nsKapp)
				return err
			},
			func() (err error) {
				run.KappWaitUpdate, err = notRun(run.KappWaitCreate, func() (*Proc, error) { return peerRun(peerTimeout, b.env, b.c.kapp, kapp(files[1])...) })
				return err
			}})
	}
	return peers, nil
}

// peerTimeout is every waiting peer's own timeout (--timeout 5m,
// --wait-timeout 5m).
const peerTimeout = 5 * time.Minute

// peerRun runs a peer whose own wait gives up after wait (0: it does not
// wait): a non-zero exit is recorded in Failed, not fatal to the
// benchmark. Either the peer's wait timed out (timedOut: Helm's kstatus
// watcher is rate-limited on the client at 3,000 objects), and its time is
// a lower bound of the peer's, or it could not do the job at all (broke:
// Helm's release Secret cannot hold 10,000 objects), and it has no time to
// compare.
func peerRun(wait time.Duration, env []string, name string, args ...string) (*Proc, error) {
	p, err := run(env, name, args...)
	if err != nil && p != nil && p.Wall > 0 {
		first, _, _ := strings.Cut(err.Error(), "\n")
		p.Failed = first
		if i := strings.LastIndex(err.Error(), "\nError: "); i >= 0 {
			last, _, _ := strings.Cut(err.Error()[i+1:], "\n")
			p.Failed += ": " + last
		}
		p.Broke = wait == 0 || p.Wall < wait.Seconds() || !saysTimedOut(err)
		what := "did not finish"
		if p.Broke {
			what = "failed"
		}
		fmt.Fprintf(os.Stderr, "bench: %s %s (%.0f s): %s\n", filepath.Base(name), what, p.Wall, p.Failed)
		return p, nil
	}
	return p, err
}

// saysTimedOut is whether a peer's error (its output after "exit status",
// not its command line, which names --timeout) says its wait ran out:
// "timed out waiting for the condition" (kubectl), "would exceed context
// deadline" (Helm's rate limiter), "Timed out waiting after 5m0s" (kapp).
func saysTimedOut(err error) bool {
	_, out, _ := strings.Cut(err.Error(), ": exit status ")
	out = strings.ToLower(out)
	return strings.Contains(out, "timed out") || strings.Contains(out, "deadline") || strings.Contains(out, "timeout")
}

// notRun is a peer's update when its create broke: it is not run (Helm's
// upgrade of a release never installed would fail for that reason, and
// kapp's would mostly create), and it is recorded broken for the create's
// reason.
func notRun(create *Proc, update func() (*Proc, error)) (*Proc, error) {
	if create.broke() {
		return &Proc{Broke: true, Failed: "not run, as the create failed: " + create.Failed}, nil
	}
	return update()
}

// timedOut is a peer that failed when its own wait ran out: its Wall is a
// lower bound of its time. (Runs recorded before Broke existed failed only
// so.)
func (p *Proc) timedOut() bool { return p != nil && p.Failed != "" && !p.Broke }

// broke is a peer that failed before its wait ran out: it could not do
// the job, and its Wall is no time for it.
func (p *Proc) broke() bool { return p != nil && p.Broke }

// sumProcs is processes run one after the other as one contender: wall
// and CPU times add up, the peak RSS is the larger one.
func sumProcs(ps ...*Proc) *Proc {
	out := &Proc{}
	for _, p := range ps {
		out.Wall += p.Wall
		out.User += p.User
		out.Sys += p.Sys
		out.MaxRSSMiB = max(out.MaxRSSMiB, p.MaxRSSMiB)
		out.Stderr = append(out.Stderr, p.Stderr...)
	}
	out.Wall = round3(out.Wall)
	return out
}

// waitingCell formats one waiting peer's seconds and ratio for the table;
// unfinished of runs did not finish (their times are lower bounds, the
// ratios upper bounds).
func waitingCell(sec, ratio float64, unfinished, runs int) (string, string) {
	if sec == 0 {
		return "–", "–"
	}
	if unfinished > 0 {
		return fmt.Sprintf("≥ %.2f s (%d of %d runs did not finish)", sec, unfinished, runs), fmt.Sprintf("≤ %.2f×", ratio)
	}
	return fmt.Sprintf("%.2f s", sec), fmt.Sprintf("%.2f×", ratio)
}

// peerCell is the table's two cells of the peer whose time is
// s.Seconds[key] and ratio s.Ratios[ratio]: its time (with its peak RSS,
// when rss > 0), or how it did not finish or failed (waitingCell,
// brokeCell), and the ratio.
func (s Summary) peerCell(key, ratio string, rss float64) (string, string) {
	sec, r := waitingCell(s.Seconds[key], s.Ratios[ratio], s.Unfinished[key], s.Runs)
	if sec != "–" && rss > 0 {
		sec += fmt.Sprintf(", %.0f MiB", rss)
	}
	return brokeCell(sec, r, s.Broke[key], s.Runs, s.Why[key])
}

// brokeCell adds to a peer's cells (waitingCell) the runs in which it broke
// (could not do the job: no time, no ratio), and why, when none finished.
func brokeCell(sec, ratio string, broke, runs int, why string) (string, string) {
	switch {
	case broke == 0:
		return sec, ratio
	case sec == "–" && strings.HasPrefix(why, "not run"):
		return fmt.Sprintf("not run (its create failed in %d of %d runs)", broke, runs), "–"
	case sec == "–":
		if i := strings.LastIndex(why, "Error: "); i >= 0 { // the peer's own message, not its command line
			why = why[i:]
		}
		return fmt.Sprintf("failed (%d of %d runs): %s", broke, runs, strings.ReplaceAll(why, "|", "\\|")), "–"
	default:
		return fmt.Sprintf("%s (failed in %d of %d runs)", sec, broke, runs), ratio
	}
}
