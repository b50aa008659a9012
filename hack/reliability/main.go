// Command reliability is the fault campaign of `make reliability`: against
// a real local control plane (etcd, kube-apiserver, kube-controller-manager
// from bin/controlplane) it runs kubectl-ql3 through racing operators, lost
// responses, crashes, API server and etcd restarts, tampered records, bad
// input and removed permissions, each case repeated and randomised from one
// printed seed, and prints one table (case, runs, expected, observed, pass)
// and writes it as JSON.
//
//	go run ./hack/reliability -bin bin/kubectl-ql3 -json reliability.json
//	go run ./hack/reliability -seed 42 -case lost     # replay one case
//
// The reduced version (-quick) runs in `make test` (reliability_test.go).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/qinglong/kubectl-ql3/internal/testkit"
)

// cases in the order they run.
var cases = []caseDef{
	{"race", caseRace},
	{"lost", caseLostResponses},
	{"crash", caseCrashes},
	{"restart", caseRestart},
	{"tamper", caseTamper},
	{"badinput", caseBadInput},
	{"privilege", caseLeastPrivilege},
	{"pointer", casePointer},
	{"approval", caseApproval},
	{"fleet", caseFleet},
}

func main() {
	seed := flag.Uint64("seed", 0, "random seed (0: from the clock); printed, and replays the campaign")
	scale := flag.Float64("runs-scale", 1, "multiply every case's run count")
	quick := flag.Bool("quick", false, "a few runs per case (the version `make test` runs)")
	jsonPath := flag.String("json", "", "also write the report as JSON here")
	bin := flag.String("bin", "bin/kubectl-ql3", "the built plugin (make build)")
	only := flag.String("case", "", "comma-separated case names to run (default: all): "+caseNames())
	workers := flag.Int("workers", 3, "runs in flight at once within a case")
	flag.Parse()
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano())
	}
	binPath, err := filepath.Abs(*bin)
	if err != nil {
		fatal(err)
	}
	root, err := testkit.ModuleRoot()
	if err != nil {
		fatal(err)
	}
	cfg := Config{Seed: *seed, RunsScale: *scale, Quick: *quick, Binary: binPath, Root: root, Workers: *workers, Log: os.Stderr}
	if *only != "" {
		cfg.Cases = strings.Split(*only, ",")
	}
	rep, err := Run(cfg, cases)
	if err != nil {
		fatal(err)
	}
	rep.Command = strings.Join(append([]string{"go run ./hack/reliability"}, os.Args[1:]...), " ")
	PrintTable(os.Stdout, rep)
	if *jsonPath != "" {
		data, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			fatal(err)
		}
		if err := os.WriteFile(*jsonPath, append(data, '\n'), 0o644); err != nil {
			fatal(err)
		}
	}
	if !rep.Pass {
		fmt.Fprintf(os.Stderr, "reliability: FAIL (seed %d)\n", rep.Seed)
		os.Exit(1)
	}
}

// PrintTable prints the report as a Markdown table (it goes into
// docs/reliability.md as is).
func PrintTable(w io.Writer, rep *Report) {
	fmt.Fprintln(w, "| case | runs | expected | observed | pass |")
	fmt.Fprintln(w, "|---|---:|---|---|---|")
	for _, r := range rep.Rows {
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s |\n", r.Case, r.Runs, r.Expected, r.Observed, passWord(r.Pass))
	}
	fmt.Fprintf(w, "\nseed %d, runs-scale %g, quick %v: %s in %s on %d CPUs (%s, kube-apiserver %s, kubectl-ql3 %s)\n",
		rep.Seed, rep.RunsScale, rep.Quick, passWord(rep.Pass), (time.Duration(rep.Seconds) * time.Second).Round(time.Second), rep.CPUs, rep.GoVersion, rep.KubeAPIServer, rep.PluginVersion)
}

func caseNames() string {
	var n []string
	for _, c := range cases {
		n = append(n, c.name)
	}
	return strings.Join(n, ", ")
}

func fatal(err error) {
	fmt.Fprintf(os.Stderr, "reliability: error: %v\n", err)
	os.Exit(1)
}
