package main

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

// benchRun is a run of one N in which every contender took 1 s, Helm (no
// wait) took helm then helmUp, and the waiting Helm took helmWait twice.
func benchRun(helm, helmUp, helmWait *Proc) *Run {
	p := func() *Proc { return &Proc{Wall: 1, MaxRSSMiB: 50} }
	r := &Run{N: 10, QL3: &QL3{InstallPreflight: p(), InstallApply: p(), UpgradePreflight: p(), UpgradeApply: p()},
		KubectlCreate: p(), KubectlUpdate: p(), KubectlWaitCreate: p(), KubectlWaitUpdate: p(),
		HelmCreate: helm, HelmUpdate: helmUp, HelmWaitCreate: helmWait, HelmWaitUpdate: helmWait,
		RawCreate: map[int]*Proc{16: p()}, RawUpdate: map[int]*Proc{16: p()}, RawBestCreate: 16, RawBestUpdate: 16, LockInstall: p()}
	r.computeRatios()
	return r
}

func hasGoal(s Summary, name string) bool {
	return slices.ContainsFunc(s.Goals, func(g Goal) bool { return strings.Contains(g.Name, name) })
}

// A peer that could not do the job (Helm's release Secret over the API's
// limit) is recorded, not fatal: no time, ratio, peak RSS or goal from the
// runs it broke in; a peer whose own wait timed out keeps its time as a
// lower bound and is not the fastest waiting peer.
func TestSummarizeBrokenPeer(t *testing.T) {
	broke := &Proc{Wall: 0.5, MaxRSSMiB: 2, Failed: "helm install: exit status 1: Error: INSTALLATION FAILED: Secret too long", Broke: true}
	timedOut := &Proc{Wall: 301, Failed: "helm upgrade --install: exit status 1: Error: context deadline exceeded"}
	finished := &Proc{Wall: 4, MaxRSSMiB: 80}

	s := summarize(10, []*Run{benchRun(broke, broke, timedOut), benchRun(finished, finished, timedOut), benchRun(broke, broke, timedOut)})
	if got := s.Seconds["helmInstall"]; got != 4 {
		t.Errorf("helmInstall = %v s, want 4 (the one run Helm finished)", got)
	}
	if got := s.Ratios["installVsHelm"]; got != 0.5 {
		t.Errorf("installVsHelm = %v, want 0.5 (2 s / 4 s, from the run Helm finished)", got)
	}
	if s.Broke["helmInstall"] != 2 || s.Unfinished["helmWaitInstall"] != 3 || s.Unfinished["helmInstall"] != 0 {
		t.Errorf("broke %v, unfinished %v: want helmInstall broke in 2 runs, helmWaitInstall unfinished in 3", s.Broke, s.Unfinished)
	}
	if got := s.PeakRSSMiB["helm"]; got != 80 {
		t.Errorf("helm peak RSS = %v MiB, want 80 (a broken run's RSS is not Helm's)", got)
	}

	// Helm broke in every run, the waiting Helm broke fast: no time, ratio
	// or goal of either, and kubectl + rollout status is the fastest.
	s = summarize(10, []*Run{benchRun(broke, broke, broke)})
	if _, ok := s.Ratios["installVsHelm"]; ok || s.Seconds["helmInstall"] != 0 || s.Seconds["helmWaitInstall"] != 0 {
		t.Errorf("every run broke: ratio %v, times %v and %v s; want none", s.Ratios["installVsHelm"], s.Seconds["helmInstall"], s.Seconds["helmWaitInstall"])
	}
	if hasGoal(s, "helm install") || hasGoal(s, "helm upgrade") {
		t.Errorf("goals %v: one from a peer that never did the job", s.Goals)
	}
	if got := s.Ratios["installVsFastestWaiting"]; got != 2 {
		t.Errorf("installVsFastestWaiting = %v, want 2 (2 s / kubectl + rollout status's 1 s, not Helm's broken 0.5 s)", got)
	}
	sec, ratio := s.peerCell("helmInstall", "installVsHelm", s.PeakRSSMiB["helm"])
	if want := "failed (1 of 1 runs): Error: INSTALLATION FAILED: Secret too long"; sec != want || ratio != "–" {
		t.Errorf("cells %q, %q; want %q, –", sec, ratio, want)
	}

	// The install finished, the upgrade broke in every run: the install's
	// goal, not the upgrade's (a missing ratio is no 0 that is "met").
	s = summarize(10, []*Run{benchRun(finished, broke, finished)})
	if !hasGoal(s, "helm install") || hasGoal(s, "helm upgrade") {
		t.Errorf("goals %v: want helm install's and not helm upgrade's", s.Goals)
	}
}

func TestNotRun(t *testing.T) {
	ran := false
	update := func() (*Proc, error) { ran = true; return &Proc{Wall: 1}, nil }
	p, err := notRun(&Proc{Wall: 0.5, Failed: "x: exit status 1: Error: too long", Broke: true}, update)
	if err != nil || ran || !p.broke() || !strings.Contains(p.Failed, "Error: too long") {
		t.Errorf("after a broken create: %+v, %v, ran %v; want a broken update not run, naming the create's error", p, err, ran)
	}
	if p, _ := notRun(&Proc{Wall: 301, Failed: "x: exit status 1: timed out"}, update); !ran || p.Wall != 1 {
		t.Errorf("after a timed-out create the update was not run")
	}
}

func TestSaysTimedOut(t *testing.T) {
	for msg, want := range map[string]bool{
		"helm upgrade --timeout 5m: exit status 1: Error: rate: Wait(n=1) would exceed context deadline": true,
		"kubectl rollout status --timeout 5m: exit status 1: error: timed out waiting for the condition": true,
		"kapp deploy --wait-timeout 5m: exit status 1: kapp: Error: Timed out waiting after 5m0s":        true,
		"helm upgrade --timeout 5m: exit status 1: Error: UPGRADE FAILED: Secret is invalid":             false,
	} {
		if got := saysTimedOut(errors.New(msg)); got != want {
			t.Errorf("saysTimedOut(%q) = %v, want %v", msg, got, want)
		}
	}
}

func TestBrokeCell(t *testing.T) {
	for _, c := range []struct {
		sec, ratio   string
		broke, runs  int
		why          string
		wantS, wantR string
	}{
		{"4.00 s", "0.50×", 0, 3, "", "4.00 s", "0.50×"},
		{"4.00 s", "0.50×", 2, 3, "x", "4.00 s (failed in 2 of 3 runs)", "0.50×"},
		{"–", "–", 3, 3, "cmd a|b: exit status 1", "failed (3 of 3 runs): cmd a\\|b: exit status 1", "–"},
	} {
		s, r := brokeCell(c.sec, c.ratio, c.broke, c.runs, c.why)
		if s != c.wantS || r != c.wantR {
			t.Errorf("brokeCell(%q, %q, %d, %d, %q) = %q, %q; want %q, %q", c.sec, c.ratio, c.broke, c.runs, c.why, s, r, c.wantS, c.wantR)
		}
	}
}

func TestMedianInterval(t *testing.T) {
	ratios := func(n int) []float64 { // n runs, not in order: 0.05 n, ..., 0.10, 0.05
		var xs []float64
		for i := range n {
			xs = append(xs, 0.05*float64(n-i))
		}
		return xs
	}
	for _, c := range []struct {
		n, k     int // the interval is the k-th smallest to the k-th largest
		coverage float64
	}{
		{25, 8, 0.9567},  // P(B(25) <= 7) = 2.16%, <= 8 is 5.39%
		{60, 22, 0.9727}, // P(B(60) <= 21) = 1.37%, <= 22 is 2.59%
		{6, 1, 0.9688},   // P(B(6) = 0) = 1.56%
		{5, 1, 0.9375},   // fewer than 6: the whole range, P(B(5) = 0) = 3.13% a side
	} {
		lo, hi, coverage := medianInterval(ratios(c.n))
		if want := 0.05 * float64(c.k); lo != want || hi != 0.05*float64(c.n+1-c.k) {
			t.Errorf("n=%d: interval %v–%v, want x(%d)–x(%d) = %v–%v", c.n, lo, hi, c.k, c.n+1-c.k, want, 0.05*float64(c.n+1-c.k))
		}
		if math.Abs(coverage-c.coverage) > 0.0001 {
			t.Errorf("n=%d: coverage %.4f, want %.4f", c.n, coverage, c.coverage)
		}
	}
}
