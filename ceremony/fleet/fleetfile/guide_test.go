package fleetfile_test

import (
	"os"
	"regexp"
	"testing"

	"github.com/qinglong/kubectl-ql3/ceremony/fleet/fleetfile"
)

// The fleet guide's fleet file (docs/guide-fleets.md, its first yaml block)
// is one this reader accepts, resolved as its text says: dev alone first,
// then both prod targets gated by approval.
func TestGuideFleetFile(t *testing.T) {
	data, err := os.ReadFile("../../../docs/guide-fleets.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindSubmatch(data)
	if m == nil {
		t.Fatal("docs/guide-fleets.md shows no fleet file (a ```yaml block)")
	}
	f, err := fleetfile.Parse(t.TempDir(), m[1])
	if err != nil {
		t.Fatalf("the fleet guide's fleet file: %v", err)
	}
	if len(f.Waves) != 2 || len(f.Waves[0].Targets) != 1 || len(f.Waves[1].Targets) != 2 || f.Waves[1].Gate != fleetfile.GateApproval || f.Waves[1].MaxParallel != 2 {
		t.Fatalf("the fleet guide's fleet resolves to %+v", f.Waves)
	}
}
