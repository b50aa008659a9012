package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/qinglong/kubectl-ql3/internal/testkit"
)

// TestReliabilityQuick is the reduced campaign `make test` runs: every case
// of `make reliability` with a few runs each, against its own control
// plane and a freshly built plugin, so a regression in any of them fails
// CI. It never skips: a missing control plane or a failed build fails it.
// QL3_RELIABILITY_SEED replays a printed seed.
func TestReliabilityQuick(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("QL3_RELIABILITY_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("QL3_RELIABILITY_SEED=%q: %v", s, err)
		}
	}
	t.Logf("seed %d (replay: QL3_RELIABILITY_SEED=%d go test -run TestReliabilityQuick ./hack/reliability/)", seed, seed)
	root, err := testkit.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "kubectl-ql3")
	build := exec.Command("go", "build", "-tags", "ql3crash", "-ldflags", "-X github.com/qinglong/kubectl-ql3/plugin.version=v0.1.0-test", "-o", bin, "./cmd/kubectl-ql3")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build kubectl-ql3: %v\n%s", err, out)
	}
	rep, err := Run(Config{Seed: seed, Quick: true, RunsScale: 1, Binary: bin, Root: root, Workers: 3, Log: testLog{t}}, cases)
	if err != nil {
		t.Fatalf("campaign: %v", err)
	}
	var table bytes.Buffer
	PrintTable(&table, rep)
	t.Logf("\n%s", table.String())
	if len(rep.Rows) < len(cases) {
		t.Fatalf("%d rows for %d cases", len(rep.Rows), len(cases))
	}
	for _, r := range rep.Rows {
		if !r.Pass || r.Runs == 0 {
			t.Errorf("%s: %s (runs %d)\n  %s", r.Case, r.Observed, r.Runs, strings.Join(r.Failures, "\n  "))
		}
	}
}

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
