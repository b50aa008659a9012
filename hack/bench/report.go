package main

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Summary holds the medians over the runs of one object count. Ratios are
// the medians of the per-run ratios (both sides measured in the same run).
type Summary struct {
	N    int `json:"n"`
	Runs int `json:"runs"`

	Seconds    map[string]float64 `json:"seconds"`
	Phases     map[string]float64 `json:"phases"`
	Ratios     map[string]float64 `json:"ratios"`
	PeakRSSMiB map[string]float64 `json:"peakRssMiB"`
	RawWorkers map[string]float64 `json:"rawSecondsByWorkers"`
	// Unfinished counts, per waiting peer's Seconds key, the runs in
	// which it did not finish its job (its time is then a lower bound).
	Unfinished map[string]int `json:"unfinished,omitempty"`
	// Broke counts, per peer's Seconds key, the runs in which it could not
	// do the job at all (no time, no ratio); Why is the first such
	// failure's message.
	Broke map[string]int    `json:"broke,omitempty"`
	Why   map[string]string `json:"why,omitempty"`
	Goals []Goal            `json:"goals"`
}

// Goal is one target of issue #8.
type Goal struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Limit float64 `json:"limit"`
	Met   bool    `json:"met"`
}

func summarize(n int, all []*Run) Summary {
	var runs []*Run
	for _, r := range all {
		if r.N == n {
			runs = append(runs, r)
		}
	}
	s := Summary{N: n, Runs: len(runs), Seconds: map[string]float64{}, Phases: map[string]float64{},
		Ratios: map[string]float64{}, PeakRSSMiB: map[string]float64{}, RawWorkers: map[string]float64{}}
	med := func(f func(*Run) float64) float64 {
		var xs []float64
		for _, r := range runs {
			xs = append(xs, f(r))
		}
		return round3(median(xs))
	}
	s.Seconds["install"] = med(func(r *Run) float64 { return r.QL3.InstallPreflight.Wall + r.QL3.InstallApply.Wall })
	s.Seconds["installPreflight"] = med(func(r *Run) float64 { return r.QL3.InstallPreflight.Wall })
	s.Seconds["installApply"] = med(func(r *Run) float64 { return r.QL3.InstallApply.Wall })
	s.Seconds["upgrade"] = med(func(r *Run) float64 { return r.QL3.UpgradePreflight.Wall + r.QL3.UpgradeApply.Wall })
	s.Seconds["upgradePreflight"] = med(func(r *Run) float64 { return r.QL3.UpgradePreflight.Wall })
	s.Seconds["upgradeApply"] = med(func(r *Run) float64 { return r.QL3.UpgradeApply.Wall })
	s.Seconds["kubectlCreate"] = med(func(r *Run) float64 { return r.KubectlCreate.Wall })
	s.Seconds["kubectlUpdate"] = med(func(r *Run) float64 { return r.KubectlUpdate.Wall })
	s.Seconds["rawCreate"] = med(func(r *Run) float64 { return r.RawCreate[r.RawBestCreate].Wall })
	s.Seconds["rawUpdate"] = med(func(r *Run) float64 { return r.RawUpdate[r.RawBestUpdate].Wall })
	s.Seconds["lock"] = med(func(r *Run) float64 { return r.LockInstall.Wall })
	// The peers, each median over the runs in which it did not break (could
	// not do the job, Proc.broke); the runs it broke in, or timed out in,
	// are counted.
	s.Unfinished, s.Broke, s.Why = map[string]int{}, map[string]int{}, map[string]string{}
	for _, peer := range []struct {
		rss, create, update string
		get                 func(*Run) (*Proc, *Proc)
	}{
		{"helm", "helmInstall", "helmUpgrade", func(r *Run) (*Proc, *Proc) { return r.HelmCreate, r.HelmUpdate }},
		{"kapp", "kappCreate", "kappUpdate", func(r *Run) (*Proc, *Proc) { return r.KappCreate, r.KappUpdate }},
		{"kubectlWait", "kubectlWaitCreate", "kubectlWaitUpdate", func(r *Run) (*Proc, *Proc) { return r.KubectlWaitCreate, r.KubectlWaitUpdate }},
		{"helmWait", "helmWaitInstall", "helmWaitUpgrade", func(r *Run) (*Proc, *Proc) { return r.HelmWaitCreate, r.HelmWaitUpdate }},
		{"kappWait", "kappWaitCreate", "kappWaitUpdate", func(r *Run) (*Proc, *Proc) { return r.KappWaitCreate, r.KappWaitUpdate }},
	} {
		if c, _ := peer.get(runs[0]); c == nil {
			continue
		}
		var rss []float64
		for i, key := range []string{peer.create, peer.update} {
			var xs []float64
			for _, r := range runs {
				p := procPair(peer.get(r))[i]
				switch {
				case p.broke():
					s.Broke[key]++
					s.Why[key] = cmp.Or(s.Why[key], p.Failed)
					continue
				case p.timedOut():
					s.Unfinished[key]++
				}
				xs = append(xs, p.Wall)
			}
			if len(xs) > 0 {
				s.Seconds[key] = round3(median(xs))
			}
		}
		for _, r := range runs { // each run's larger peak of the two, as maxRSS
			if ok := finished(peer.get(r)); len(ok) > 0 {
				rss = append(rss, maxRSS(ok...))
			}
		}
		if len(rss) > 0 {
			s.PeakRSSMiB[peer.rss] = round3(median(rss))
		}
	}
	if runs[0].QL3Before != nil {
		s.Seconds["beforeInstall"] = med(func(r *Run) float64 { return r.QL3Before.InstallPreflight.Wall + r.QL3Before.InstallApply.Wall })
		s.Seconds["beforeInstallApply"] = med(func(r *Run) float64 { return r.QL3Before.InstallApply.Wall })
		s.Seconds["beforeUpgrade"] = med(func(r *Run) float64 { return r.QL3Before.UpgradePreflight.Wall + r.QL3Before.UpgradeApply.Wall })
		s.Seconds["beforeUpgradeApply"] = med(func(r *Run) float64 { return r.QL3Before.UpgradeApply.Wall })
		s.Phases["beforeInstallApply.converge"] = med(func(r *Run) float64 { return r.QL3Before.InstallApply.Phases["converge"] })
		s.Phases["beforeInstallApply.cpu"] = med(func(r *Run) float64 { return r.QL3Before.InstallApply.User + r.QL3Before.InstallApply.Sys })
		s.Phases["beforeUpgradeApply.cpu"] = med(func(r *Run) float64 { return r.QL3Before.UpgradeApply.User + r.QL3Before.UpgradeApply.Sys })
		s.PeakRSSMiB["ql3Before"] = med(func(r *Run) float64 {
			b := r.QL3Before
			return maxRSS(b.InstallPreflight, b.InstallApply, b.UpgradePreflight, b.UpgradeApply)
		})
	}
	for _, w := range workersOf(runs) {
		s.RawWorkers[fmt.Sprintf("create-%d", w)] = med(func(r *Run) float64 { return r.RawCreate[w].Wall })
		s.RawWorkers[fmt.Sprintf("update-%d", w)] = med(func(r *Run) float64 { return r.RawUpdate[w].Wall })
		for _, k := range []string{"create", "update"} {
			for _, pass := range []string{"dryRun", "apply"} {
				key := fmt.Sprintf("%s-%d-%s", k, w, pass)
				s.RawWorkers[key] = med(func(r *Run) float64 { return r.RawPasses[key] })
			}
		}
	}
	for _, ph := range []struct {
		name string
		get  func(*Run) *Proc
	}{
		{"installPreflight", func(r *Run) *Proc { return r.QL3.InstallPreflight }},
		{"installApply", func(r *Run) *Proc { return r.QL3.InstallApply }},
		{"upgradePreflight", func(r *Run) *Proc { return r.QL3.UpgradePreflight }},
		{"upgradeApply", func(r *Run) *Proc { return r.QL3.UpgradeApply }},
	} {
		keys := map[string]bool{}
		for _, r := range runs {
			for k := range ph.get(r).Phases {
				keys[k] = true
			}
		}
		for k := range keys {
			s.Phases[ph.name+"."+k] = med(func(r *Run) float64 { return ph.get(r).Phases[k] })
		}
		s.Phases[ph.name+".cpu"] = med(func(r *Run) float64 { return ph.get(r).User + ph.get(r).Sys })
	}
	// A ratio is the median over the runs that have it (none where the
	// peer broke).
	keys := map[string]bool{}
	for _, r := range runs {
		for k := range r.Ratios {
			keys[k] = true
		}
	}
	for k := range keys {
		var xs []float64
		for _, r := range runs {
			if v, ok := r.Ratios[k]; ok {
				xs = append(xs, v)
			}
		}
		s.Ratios[k] = round3(median(xs))
	}
	s.PeakRSSMiB["ql3"] = med(func(r *Run) float64 {
		return maxRSS(r.QL3.InstallPreflight, r.QL3.InstallApply, r.QL3.UpgradePreflight, r.QL3.UpgradeApply)
	})
	s.PeakRSSMiB["kubectl"] = med(func(r *Run) float64 { return maxRSS(r.KubectlCreate, r.KubectlUpdate) })
	s.PeakRSSMiB["raw"] = med(func(r *Run) float64 { return maxRSS(r.RawCreate[r.RawBestCreate], r.RawUpdate[r.RawBestUpdate]) })
	// A goal whose ratio no run has (a peer left out, or one that broke in
	// every run) is not a goal of this summary.
	goal := func(name, key string, limit float64) {
		if v, ok := s.Ratios[key]; ok {
			s.Goals = append(s.Goals, Goal{Name: name, Value: v, Limit: limit, Met: v <= limit})
		}
	}
	goal("install (preflight + apply) / kubectl apply --server-side create", "installVsKubectl", 1.0)
	goal("install (preflight + apply) / raw lower bound (dry-run + apply)", "installVsRaw", 1.3)
	goal("upgrade (preflight + apply) / kubectl apply --server-side update", "upgradeVsKubectl", 1.0)
	goal("upgrade (preflight + apply) / raw lower bound (dry-run + apply)", "upgradeVsRaw", 1.3)
	goal("peak RSS of kubectl-ql3 / peak RSS of kubectl", "rssVsKubectl", 1.0)
	goal("install: the ceremony's own client work (less render and the controllers' wait) / raw lower bound", "installClientVsRaw", 1.2)
	goal("upgrade: the ceremony's own client work (less render) / raw lower bound", "upgradeClientVsRaw", 1.2)
	// Issue #18: against the peers that wait until Current.
	goal("install / fastest waiting peer (kubectl + rollout status, helm --wait, kapp deploy)", "installVsFastestWaiting", 1.0)
	goal("upgrade / fastest waiting peer", "upgradeVsFastestWaiting", 1.0)
	goal("install / kubectl apply --server-side -k + rollout status", "installVsKubectlWait", 1.0)
	goal("upgrade / kubectl apply --server-side -k + rollout status", "upgradeVsKubectlWait", 1.0)
	goal("peak RSS of kubectl-ql3 / peak RSS of kubectl apply -k + rollout status", "rssVsKubectlWait", 1.0)
	goal("install / helm install", "installVsHelm", 1.0)
	goal("upgrade / helm upgrade", "upgradeVsHelm", 1.0)
	goal("install / kapp deploy --wait=false (create)", "installVsKapp", 1.0)
	goal("upgrade / kapp deploy --wait=false (update)", "upgradeVsKapp", 1.0)
	return s
}

// procPair is a peer's create and update, as a slice.
func procPair(create, update *Proc) []*Proc { return []*Proc{create, update} }

// finished is those of a peer's create and update that did not break: the
// ones whose peak RSS is the peer's.
func finished(create, update *Proc) []*Proc {
	var ok []*Proc
	for _, p := range procPair(create, update) {
		if p != nil && !p.broke() {
			ok = append(ok, p)
		}
	}
	return ok
}

// reportMain re-derives the ratios, the summaries and the tables of a
// bench.json from its runs (`go run ./hack/bench report [-table F]
// bench.json`), rewriting the file in place: a change to what the report
// computes needs no new 90-minute run.
func reportMain(args []string) {
	fs := flag.NewFlagSet("report", flag.ExitOnError)
	table := fs.String("table", "", "also write the Markdown tables here")
	_ = fs.Parse(args)
	if fs.NArg() != 1 {
		die(fmt.Errorf("usage: hack/bench report [-table FILE] bench.json"))
	}
	path := fs.Arg(0)
	data, err := os.ReadFile(path)
	if err != nil {
		die(err)
	}
	var rep Report
	if err := json.Unmarshal(data, &rep); err != nil {
		die(fmt.Errorf("%s: %w", path, err))
	}
	var ns []int
	for _, r := range rep.Runs {
		r.computeRatios()
		if !slices.Contains(ns, r.N) {
			ns = append(ns, r.N)
		}
	}
	rep.Summary = nil
	for _, n := range ns {
		rep.Summary = append(rep.Summary, summarize(n, rep.Runs))
	}
	out, err := json.MarshalIndent(&rep, "", "  ")
	if err != nil {
		die(err)
	}
	if err := os.WriteFile(path, append(out, '\n'), 0o644); err != nil {
		die(err)
	}
	md := markdown(&rep)
	fmt.Print(md)
	if *table != "" {
		if err := os.WriteFile(*table, []byte(md), 0o644); err != nil {
			die(err)
		}
	}
}

func workersOf(runs []*Run) []int {
	var ws []int
	for _, r := range runs {
		for w := range r.RawCreate {
			if !slices.Contains(ws, w) {
				ws = append(ws, w)
			}
		}
	}
	slices.Sort(ws)
	return ws
}

// RenderBench is `kubectl ql3 lock` and render + lock verify of one large
// release against `kubectl kustomize` of the same tree, in the same run.
type RenderBench struct {
	N                 int     `json:"n"`
	Runs              int     `json:"runs"`
	LockSeconds       float64 `json:"lockSeconds"`
	LockRSSMiB        float64 `json:"lockPeakRssMiB"`
	LockRatio         float64 `json:"lockRatio"`
	LockVerifySeconds float64 `json:"lockVerifySeconds"`
	LockVerifyRSSMiB  float64 `json:"lockVerifyPeakRssMiB"`
	KustomizeSeconds  float64 `json:"kustomizeSeconds"`
	KustomizeRSSMiB   float64 `json:"kustomizePeakRssMiB"`
	Ratio             float64 `json:"ratio"`
	RSSRatio          float64 `json:"rssRatio"`
}

func (b *bencher) renderBench(n int) (*RenderBench, error) {
	dir := filepath.Join(b.work, fmt.Sprintf("render-%d", n))
	if err := writeRelease(dir, "bench-render", objects(n, "bench-render", 1)); err != nil {
		return nil, err
	}
	offline := "sha256:" + strings.Repeat("0", 64)
	// The timed lock renders from scratch (--no-cache) and rewrites the
	// lock (--update), as `kubectl ql3 lock` of a new release does.
	lockArgs := []string{"lock", dir, "--version", "1.0.0", "--cluster-identity", offline, "--update", "--no-cache"}
	rb := &RenderBench{N: n, Runs: b.c.renderRuns}
	var lk, lkr, lv, lr, kz, kr, lockRatios, ratios, rssRatios []float64
	for i := 0; i < b.c.renderRuns; i++ {
		fmt.Fprintf(os.Stderr, "bench: lock, render + lock verify and kubectl kustomize, %d objects, run %d\n", n, i+1)
		l, err := run(b.env, b.c.plugin, lockArgs...)
		if err != nil {
			return nil, err
		}
		p, err := run(b.env, b.c.plugin, "lock", "verify", dir)
		if err != nil {
			return nil, err
		}
		k, err := run(b.env, b.c.kubectl, "kustomize", dir)
		if err != nil {
			return nil, err
		}
		lk, lkr = append(lk, l.Wall), append(lkr, l.MaxRSSMiB)
		lv, lr = append(lv, p.Wall), append(lr, p.MaxRSSMiB)
		kz, kr = append(kz, k.Wall), append(kr, k.MaxRSSMiB)
		lockRatios = append(lockRatios, l.Wall/k.Wall)
		ratios, rssRatios = append(ratios, p.Wall/k.Wall), append(rssRatios, p.MaxRSSMiB/k.MaxRSSMiB)
	}
	rb.LockSeconds, rb.LockRSSMiB, rb.LockRatio = round3(median(lk)), round3(median(lkr)), round3(median(lockRatios))
	rb.LockVerifySeconds, rb.LockVerifyRSSMiB = round3(median(lv)), round3(median(lr))
	rb.KustomizeSeconds, rb.KustomizeRSSMiB = round3(median(kz)), round3(median(kr))
	rb.Ratio, rb.RSSRatio = round3(median(ratios)), round3(median(rssRatios))
	return rb, nil
}

// AuditBench is receipts' BenchmarkAuditChain1000 (go test -bench).
type AuditBench struct {
	Benchmark   string  `json:"benchmark"`
	NsPerOp     float64 `json:"nsPerOp"`
	BytesPerOp  float64 `json:"bytesPerOp"`
	AllocsPerOp float64 `json:"allocsPerOp"`
}

func auditBench() (*AuditBench, error) {
	fmt.Fprintf(os.Stderr, "bench: go test -bench AuditChain1000 ./receipts/\n")
	cmd := exec.Command("go", "test", "-run", "^$", "-bench", "^BenchmarkAuditChain1000$", "-benchmem", "-count", "1", "./receipts/")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%v\n%s", err, out.String())
	}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "BenchmarkAuditChain1000") {
			continue
		}
		a := &AuditBench{Benchmark: f[0]}
		for i := 2; i+1 < len(f); i += 2 {
			v, _ := strconv.ParseFloat(f[i], 64)
			switch f[i+1] {
			case "ns/op":
				a.NsPerOp = v
			case "B/op":
				a.BytesPerOp = v
			case "allocs/op":
				a.AllocsPerOp = v
			}
		}
		return a, nil
	}
	return nil, fmt.Errorf("no result in:\n%s", out.String())
}

// markdown is the table of docs/performance.md.
func markdown(rep *Report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "`%s` on %s (%d cores shared by the control plane and the client; medians of %v run(s); ratios are per run, then the median):\n\n",
		rep.Command, rep.Date[:10], rep.Machine.CPUs, rep.Config["runs"])
	b.WriteString("| N | transition | kubectl-ql3 preflight + apply | `kubectl apply --server-side` (no wait) | raw SSA lower bound (dry-run + apply) | vs kubectl | vs raw | peak RSS ql3 / kubectl |\n")
	b.WriteString("|---:|---|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range rep.Summary {
		fmt.Fprintf(&b, "| %s | install | %.2f s (%.2f + %.2f) | %.2f s | %.2f s | %.2f× | %.2f× | %.0f / %.0f MiB |\n",
			thousands(s.N), s.Seconds["install"], s.Seconds["installPreflight"], s.Seconds["installApply"],
			s.Seconds["kubectlCreate"], s.Seconds["rawCreate"], s.Ratios["installVsKubectl"], s.Ratios["installVsRaw"],
			s.PeakRSSMiB["ql3"], s.PeakRSSMiB["kubectl"])
		fmt.Fprintf(&b, "| %s | upgrade, every ConfigMap changed | %.2f s (%.2f + %.2f) | %.2f s | %.2f s | %.2f× | %.2f× | |\n",
			thousands(s.N), s.Seconds["upgrade"], s.Seconds["upgradePreflight"], s.Seconds["upgradeApply"],
			s.Seconds["kubectlUpdate"], s.Seconds["rawUpdate"], s.Ratios["upgradeVsKubectl"], s.Ratios["upgradeVsRaw"])
	}
	for _, s := range rep.Summary {
		if _, ok := s.Seconds["beforeInstall"]; ok {
			fmt.Fprintf(&b, "\nN=%s, same run, -plugin-before: install %.2f s (apply %.2f s, converge %.2f s, apply CPU %.2f s) before vs %.2f s (apply %.2f s, converge %.2f s, apply CPU %.2f s) now (%.2f×); upgrade %.2f s vs %.2f s (%.2f×); peak RSS %.0f vs %.0f MiB.\n",
				thousands(s.N), s.Seconds["beforeInstall"], s.Seconds["beforeInstallApply"], s.Phases["beforeInstallApply.converge"], s.Phases["beforeInstallApply.cpu"],
				s.Seconds["install"], s.Seconds["installApply"], s.Phases["installApply.converge"], s.Phases["installApply.cpu"], s.Ratios["installVsBefore"],
				s.Seconds["beforeUpgrade"], s.Seconds["upgrade"], s.Ratios["upgradeVsBefore"], s.PeakRSSMiB["ql3Before"], s.PeakRSSMiB["ql3"])
		}
	}
	b.WriteString("\nWhere an install's apply spends its time (medians, seconds; `load` = process start, render and lock verify; apply's `load + acquire` adds the identity and Head reads, the permission review and the Head CAS):\n\n")
	b.WriteString("| N | preflight: load / access review / dry-run | apply: load + acquire / apply / converge / commit | converge share of apply |\n|---:|---|---|---:|\n")
	for _, s := range rep.Summary {
		p := s.Phases
		conv := 0.0
		if a := s.Seconds["installApply"]; a > 0 {
			conv = p["installApply.converge"] / a
		}
		fmt.Fprintf(&b, "| %s | %.2f / %.2f / %.2f | %.2f / %.2f / %.2f / %.2f | %.0f%% |\n", thousands(s.N),
			p["installPreflight.load"], p["installPreflight.access"], p["installPreflight.dryRun"],
			p["installApply.loadAcquire"], p["installApply.apply"], p["installApply.converge"], p["installApply.commit"], 100*conv)
	}
	if s0 := rep.Summary; len(s0) > 0 && (s0[0].Seconds["helmInstall"] > 0 || s0[0].Broke["helmInstall"] > 0 || s0[0].Seconds["kappCreate"] > 0 || s0[0].Broke["kappCreate"] > 0) {
		b.WriteString("\nThe same objects, same runs, against Helm and kapp (medians; ratio = kubectl-ql3 preflight + apply / peer, per run, then the median; peak RSS):\n\n")
		b.WriteString("| N | transition | kubectl-ql3 | `helm install` / `helm upgrade` | vs Helm | `kapp deploy --wait=false` | vs kapp |\n|---:|---|---:|---:|---:|---:|---:|\n")
		for _, s := range rep.Summary {
			h, hr := s.peerCell("helmInstall", "installVsHelm", s.PeakRSSMiB["helm"])
			k, kr := s.peerCell("kappCreate", "installVsKapp", s.PeakRSSMiB["kapp"])
			fmt.Fprintf(&b, "| %s | install | %.2f s, %.0f MiB | %s | %s | %s | %s |\n", thousands(s.N), s.Seconds["install"], s.PeakRSSMiB["ql3"], h, hr, k, kr)
			h, hr = s.peerCell("helmUpgrade", "upgradeVsHelm", 0)
			k, kr = s.peerCell("kappUpdate", "upgradeVsKapp", 0)
			fmt.Fprintf(&b, "| %s | upgrade | %.2f s | %s | %s | %s | %s |\n", thousands(s.N), s.Seconds["upgrade"], h, hr, k, kr)
		}
	}
	b.WriteString("\nThe same objects, same runs, against peers that wait until every object is Current, as apply does (medians; ratio = kubectl-ql3 preflight + apply / peer, per run, then the median; the no-wait rows above are kept for reference):\n\n")
	b.WriteString("| N | transition | kubectl-ql3 | `kubectl apply --server-side -k` + `rollout status` | vs kubectl+wait | `helm upgrade --install --wait` | vs Helm | `kapp deploy` (waits) | vs kapp | vs fastest waiting peer |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range rep.Summary {
		for _, t := range []struct{ name, ql3, kw, hw, kaw, key string }{
			{"install", "install", "kubectlWaitCreate", "helmWaitInstall", "kappWaitCreate", "install"},
			{"upgrade", "upgrade", "kubectlWaitUpdate", "helmWaitUpgrade", "kappWaitUpdate", "upgrade"},
		} {
			k, kr := s.peerCell(t.kw, t.key+"VsKubectlWait", 0)
			h, hr := s.peerCell(t.hw, t.key+"VsHelmWait", 0)
			ka, kar := s.peerCell(t.kaw, t.key+"VsKappWait", 0)
			fmt.Fprintf(&b, "| %s | %s | %.2f s | %s | %s | %s | %s | %s | %s | %.2f× |\n", thousands(s.N), t.name, s.Seconds[t.ql3],
				k, kr, h, hr, ka, kar, s.Ratios[t.key+"VsFastestWaiting"])
		}
	}
	if r := rep.Render; r != nil {
		b.WriteString(renderLine(r))
	}
	if a := rep.Audit; a != nil {
		fmt.Fprintf(&b, "Offline audit of a 1,000-receipt chain (`%s`): %.0f ms, %.0f MiB allocated.\n", a.Benchmark, a.NsPerOp/1e6, a.BytesPerOp/(1<<20))
	}
	b.WriteString("\nGoals (issues #8 and #18):\n\n")
	for _, s := range rep.Summary {
		for _, g := range s.Goals {
			mark := "met"
			if !g.Met {
				mark = "**missed**"
			}
			fmt.Fprintf(&b, "- N=%s: %s = %.2f (≤ %.1f): %s\n", thousands(s.N), g.Name, g.Value, g.Limit, mark)
		}
	}
	if len(rep.Throttled) > 0 {
		fmt.Fprintf(&b, "\nClient-side throttling seen %d time(s), e.g. %q.\n", len(rep.Throttled), rep.Throttled[0])
	} else {
		b.WriteString("\nNo client-side throttling was reported by any kubectl-ql3 process.\n")
	}
	return b.String()
}

func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// renderLine is the render benchmark's sentence of the table.
func renderLine(r *RenderBench) string {
	lock := "" // reports written before lock was timed have none
	if r.LockSeconds > 0 {
		lock = fmt.Sprintf("`kubectl ql3 lock` %.2f s / %.0f MiB (%.2f× time) and ", r.LockSeconds, r.LockRSSMiB, r.LockRatio)
	}
	return fmt.Sprintf("\nRendering %s objects, same run: %s`kubectl ql3 lock verify` %.2f s / %.0f MiB (%.2f× time, %.2f× RSS) vs `kubectl kustomize` %.2f s / %.0f MiB.\n",
		thousands(r.N), lock, r.LockVerifySeconds, r.LockVerifyRSSMiB, r.Ratio, r.RSSRatio, r.KustomizeSeconds, r.KustomizeRSSMiB)
}
