package views

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"testing"

	"github.com/qinglong/kubectl-ql3/inventory"
)

// reportCases are change lists as Diff returns them: none, one, and
// several with what JSON escapes (HTML characters, a newline, non-ASCII),
// a note and a retire list.
func reportCases() map[string]*DiffReport {
	cm := func(name string) inventory.Identity {
		return inventory.Identity{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: name}
	}
	return map[string]*DiffReport{
		"none": {Schema: DiffSchema, Namespace: "ns", Version: "1.0.0", Objects: []ObjectChange{}},
		"one":  {Schema: DiffSchema, Namespace: "ns", Version: "1.0.0", Created: 1, Objects: []ObjectChange{{Object: cm("a"), Change: Created, Diff: "+a: 1\n"}}},
		"several": {Schema: DiffSchema, Namespace: "ns", Version: "2.0.0-rc.1", Created: 1, Changed: 2, Unchanged: 1, Objects: []ObjectChange{
			{Object: cm("a"), Change: Changed, Diff: "--- live/a\n+++ dry-run/a\n-x: <b>&amp;</b>\n+x: \"é\" \u2028\n"},
			{Object: cm("b"), Change: Unchanged},
			{Object: cm("c"), Change: Created, Note: "rendered object: its namespace or CRD is created by this release, so it cannot be dry-run yet", Diff: "+c: 3\n"},
			{Object: cm("d"), Change: Changed, Diff: "-objects: []\n+\"objects\": []\n"},
		}, Retire: []WouldRetire{{Object: cm("gone"), UID: "u-1", ResourceVersion: "7"}, {Object: cm("absent")}}},
	}
}

// spooled is rep with its texts moved to a spool, as Diff leaves a
// spooled report.
func spooled(t *testing.T, rep *DiffReport) *DiffReport {
	t.Helper()
	s := newTextSpool()
	if s == nil {
		t.Fatal("no temporary file for the spool")
	}
	out := *rep
	out.Objects, out.texts = slices.Clone(rep.Objects), s
	// put in reverse, as concurrent comparisons finish in any order
	for i := len(out.Objects) - 1; i >= 0; i-- {
		if out.Objects[i].Diff == "" {
			continue
		}
		sp, err := s.put(out.Objects[i].Diff)
		if err != nil {
			t.Fatal(err)
		}
		out.Objects[i].Diff, out.Objects[i].spooled = "", sp
	}
	t.Cleanup(func() { _ = out.Close() })
	return &out
}

// TestDiffReportWriteJSON: WriteJSON writes what json.MarshalIndent(r, "",
// "  ") and a newline would, byte for byte, whether the texts are in
// memory or spooled; a spooled report's digest, texts and filled form are
// those of the report it was made from, and encoding it whole without
// Fill is refused rather than done without its texts.
func TestDiffReportWriteJSON(t *testing.T) {
	for name, rep := range reportCases() {
		want, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, '\n')
		wantDigest, err := DiffDigest(rep.Objects)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range []*DiffReport{rep, spooled(t, rep)} {
			var b bytes.Buffer
			if err := r.WriteJSON(&b); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if !bytes.Equal(b.Bytes(), want) {
				t.Errorf("%s (spooled %v): WriteJSON\n%s\nwant\n%s", name, r.texts != nil, b.Bytes(), want)
			}
			if got, err := r.digest(); err != nil || got != wantDigest {
				t.Errorf("%s (spooled %v): digest %s (%v), want %s", name, r.texts != nil, got, err, wantDigest)
			}
			var texts []string
			_ = r.Each(func(ch ObjectChange) error { texts = append(texts, ch.Diff); return nil })
			for i, ch := range rep.Objects {
				if texts[i] != ch.Diff {
					t.Errorf("%s: Each gave text %d %q, want %q", name, i, texts[i], ch.Diff)
				}
			}
		}
		s := spooled(t, rep)
		if _, err := json.Marshal(s); !errors.Is(err, errSpooled) {
			t.Errorf("%s: json.Marshal of a spooled report: %v, want the refusal", name, err)
		}
		if err := s.Fill(); err != nil {
			t.Fatal(err)
		}
		if got, err := json.MarshalIndent(s, "", "  "); err != nil || !bytes.Equal(append(got, '\n'), want) {
			t.Errorf("%s: filled report encodes as\n%s (%v)\nwant\n%s", name, got, err, want)
		}
	}
}

// TestTextSpoolLeavesNoFile: the spool's file has no name once made (it
// cannot outlive the process), and a text reads back as put.
func TestTextSpoolLeavesNoFile(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("TMPDIR", dir)
	s := newTextSpool()
	if s == nil {
		t.Fatal("no spool")
	}
	defer s.close()
	if left, _ := os.ReadDir(dir); len(left) != 0 || s.name != "" {
		t.Fatalf("spool left %v named in %s (name %q)", left, dir, s.name)
	}
	one, err := s.put("text one\n")
	if err != nil {
		t.Fatal(err)
	}
	two, err := s.put("text two\n")
	if err != nil {
		t.Fatal(err)
	}
	for sp, want := range map[*span]string{one: "text one\n", two: "text two\n"} {
		if got, err := s.get(sp); err != nil || got != want {
			t.Fatalf("get(%v) = %q, %v; want %q", *sp, got, err, want)
		}
	}
}
