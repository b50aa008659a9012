package main

import (
	"strings"
	"testing"
)

// benchRun is a run of one N in which every contender took wall seconds,
// Helm (no wait) took helm, and the waiting Helm took helmWait.
func benchRun(wall float64, helm, helmWait *Proc) *Run {
	p := func() *Proc { return &Proc{Wall: wall, MaxRSSMiB: 50} }
	r := &Run{N: 10, QL3: &QL3{InstallPreflight: p(), InstallApply: p(), UpgradePreflight: p(), UpgradeApply: p()},
		KubectlCreate: p(), KubectlUpdate: p(), KubectlWaitCreate: p(), KubectlWaitUpdate: p(),
		HelmCreate: helm, HelmUpdate: helm, HelmWaitCreate: helmWait, HelmWaitUpdate: helmWait,
		RawCreate: map[int]*Proc{16: p()}, RawUpdate: map[int]*Proc{16: p()}, RawBestCreate: 16, RawBestUpdate: 16, LockInstall: p()}
	r.computeRatios()
	return r
}

// A peer that could not do the job (Helm's release Secret over the API's
// limit) is recorded, not fatal: no time, no ratio and no goal from the
// runs it broke in; a peer whose own wait timed out keeps its time as a
// lower bound.
func TestSummarizeBrokenPeer(t *testing.T) {
	broke := &Proc{Wall: 0.5, Failed: "helm install: exit status 1: Error: INSTALLATION FAILED: Secret too long", Broke: true}
	timedOut := &Proc{Wall: 301, Failed: "helm upgrade --install: exit status 1: Error: context deadline exceeded"}
	finished := &Proc{Wall: 4, MaxRSSMiB: 80}

	s := summarize(10, []*Run{benchRun(1, broke, timedOut), benchRun(1, finished, timedOut), benchRun(1, broke, timedOut)})
	if got := s.Seconds["helmInstall"]; got != 4 {
		t.Errorf("helmInstall = %v s, want 4 (the one run Helm finished)", got)
	}
	if got := s.Ratios["installVsHelm"]; got != 0.5 {
		t.Errorf("installVsHelm = %v, want 0.5 (2 s / 4 s, from the run Helm finished)", got)
	}
	if s.Broke["helmInstall"] != 2 || s.Unfinished["helmWaitInstall"] != 3 {
		t.Errorf("broke %v, unfinished %v: want helmInstall broke in 2 runs, helmWaitInstall unfinished in 3", s.Broke, s.Unfinished)
	}
	if got := s.PeakRSSMiB["helm"]; got != 80 {
		t.Errorf("helm peak RSS = %v MiB, want 80 (a broken run's RSS is not Helm's)", got)
	}

	s = summarize(10, []*Run{benchRun(1, broke, timedOut)})
	if _, ok := s.Ratios["installVsHelm"]; ok || s.Seconds["helmInstall"] != 0 {
		t.Errorf("every run broke: ratio %v and time %v s, want neither", s.Ratios["installVsHelm"], s.Seconds["helmInstall"])
	}
	for _, g := range s.Goals {
		if strings.Contains(g.Name, "helm install") {
			t.Errorf("goal %q from a peer that never did the job", g.Name)
		}
	}
	if got := s.Ratios["installVsFastestWaiting"]; got != 2 {
		t.Errorf("installVsFastestWaiting = %v, want 2 (kubectl + rollout status; Helm's timed-out run is not the fastest)", got)
	}
	sec, ratio := waitingCell(s.Seconds["helmInstall"], s.Ratios["installVsHelm"], 0, s.Runs)
	sec, ratio = brokeCell(sec, ratio, s.Broke["helmInstall"], s.Runs, s.Why["helmInstall"])
	if want := "failed (1 of 1 runs): Error: INSTALLATION FAILED: Secret too long"; sec != want || ratio != "–" {
		t.Errorf("cells %q, %q; want %q, –", sec, ratio, want)
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
