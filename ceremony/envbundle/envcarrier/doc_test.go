package envcarrier

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The worked example of docs/env-bundle.md parses, and the figures the
// page states for it are the ones Parse computes.
func TestDocExample(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/env-bundle.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```json env-bundle=example\n(.*?)\n```").FindSubmatch(doc)
	if m == nil {
		t.Fatal("no ```json env-bundle=example block in docs/env-bundle.md")
	}
	b, err := Parse(m[1])
	if err != nil {
		t.Fatalf("the example does not parse: %v", err)
	}
	figures := regexp.MustCompile(`It holds (\d+)\s+entries, its names and values total (\d+) bytes, and it is (\d+) bytes long`).FindSubmatch(doc)
	if figures == nil {
		t.Fatal("the page states no figures for the example")
	}
	for i, got := range []int{b.Len(), b.NameValueBytes(), b.Size()} {
		if want, _ := strconv.Atoi(string(figures[i+1])); got != want {
			t.Errorf("figure %d: the page says %d, Parse computes %d", i+1, want, got)
		}
	}
	// The formula the page gives, applied to the example.
	want := 55 + 23*b.Len()
	for _, e := range b.Entries() {
		want += len(e.Name) + escapedLen(e.Value)
	}
	if want != b.Size() {
		t.Errorf("size formula %d, carrier %d bytes", want, b.Size())
	}
	if !strings.Contains(string(doc), "55 + 23·n + Σ len(name) + Σ escaped(value)") {
		t.Error("the page no longer states the size formula the tests check")
	}
}
