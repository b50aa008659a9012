package keyset

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/qinglong/kubectl-ql3/ceremony/keyset/jwkset"
)

// PlanRotation names the two new files after their generations in dir,
// holds their exact bytes, and summarises the three generations in the
// order they are published.
func TestPlanRotation(t *testing.T) {
	cur := gen(t, 7, []string{"a-1", "b-1"})
	dir := t.TempDir()
	p, err := PlanRotation(cur, "/keys/keyset-7.json", key("c-1", 'c'), []string{"a-1"}, dir)
	if err != nil {
		t.Fatal(err)
	}
	r, err := jwkset.PlanRotation(cur, key("c-1", 'c'), []string{"a-1"})
	if err != nil {
		t.Fatal(err)
	}
	overlap, revoking := filepath.Join(dir, "keyset-8.json"), filepath.Join(dir, "keyset-9.json")
	for i, want := range []struct {
		path string
		k    *jwkset.Keyset
	}{{overlap, r.Overlap}, {revoking, r.Revoking}} {
		data, err := want.k.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if f := p.Files[i]; f.Path != want.path || !bytes.Equal(f.Data, data) {
			t.Errorf("file %d: %s, want %s with the generation's encoding", i, f.Path, want.path)
		}
	}
	if len(p.Files) != 2 {
		t.Fatalf("%d files, want 2", len(p.Files))
	}
	got := []string{p.Current.File, p.Current.Kids(), p.Overlap.File, p.Overlap.Kids(), p.Revoking.File, p.Revoking.Kids()}
	want := []string{"/keys/keyset-7.json", "a-1, b-1", overlap, "a-1, b-1, c-1", revoking, "b-1, c-1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("summaries (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"a-1"}, p.Revoked); diff != "" || len(p.Procedure) != 4 || p.Revoking.RevokedKids[0] != "a-1" {
		t.Errorf("revoked %v, revoking generation %v, %d procedure steps", p.Revoked, p.Revoking.RevokedKids, len(p.Procedure))
	}
}
