package vectors

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/qinglong/kubectl-ql3/ceremony/envbundle/envcarrier"
)

// TestEnvBundleVectors runs testdata/vectors/env-bundle against
// ceremony/envbundle/envcarrier (docs/env-bundle.md): carriers through
// Parse (the rules of verify), dotenv and JSON inputs through PackDotenv
// and PackJSON; the verdict, the rule and the position the error names,
// an accepted carrier's counts and sizes, a packed carrier's bytes.
func TestEnvBundleVectors(t *testing.T) {
	each(t, "env-bundle", map[string]procedure{
		"verify":      carrierVector(envcarrier.Parse),
		"pack-dotenv": carrierVector(envcarrier.PackDotenv),
		"pack-json":   carrierVector(envcarrier.PackJSON),
		"merge":       mergeVector,
	})
}

// mergeVector merges a names file against a carrier (verify --against-env):
// the names file's rules, then the merge rules, whose report is compared
// with one recomputed from the two files.
func mergeVector(t *testing.T, v vector, input []byte) {
	carrier := file(t, "env-bundle", v.Carrier)
	b, err := envcarrier.Parse(carrier)
	if err != nil {
		t.Fatal(err)
	}
	names, err := envcarrier.ParseNames(input)
	var r envcarrier.MergeReport
	if err == nil {
		r, err = envcarrier.CheckMerge(b, names)
	}
	verdict(t, v, err)
	var e *envcarrier.Error
	if err != nil && (!errors.As(err, &e) || v.Where == nil || e.Where != *v.Where) {
		t.Errorf("error %v, want the position %q", err, deref(v.Where))
	}
	if v.Figures == nil {
		return
	}
	got := map[string]int{"collisions": r.Collisions, "mergedEntries": r.MergedEntries, "mergedNameValueBytesAtLeast": r.MergedNameValueBytesAtLeast}
	want := mergeFigures(t, carrier, input)
	for name, inFile := range v.Figures {
		if want[name] != inFile || got[name] != inFile {
			t.Errorf("%s: vector file %d, recomputed %d, code %d", name, inFile, want[name], got[name])
		}
	}
}

// mergeFigures is docs/env-bundle.md's merge report from the carrier and
// the names file: collisions, merged entries, and the lower bound of the
// merged names and values.
func mergeFigures(t *testing.T, carrier, names []byte) map[string]int {
	t.Helper()
	have, size := map[string]bool{}, 0
	entries := jsonValue(t, carrier).(map[string]any)["entries"].([]any)
	for _, e := range entries {
		n := e.(map[string]any)["name"].(string)
		have[n], size = true, size+len(n)+len(e.(map[string]any)["value"].(string))
	}
	var task []string
	for _, l := range strings.Split(string(names), "\n") {
		if l = strings.Trim(l, " \t"); l != "" && !strings.HasPrefix(l, "#") {
			task = append(task, l)
		}
	}
	collisions := 0
	for _, n := range task {
		if have[n] {
			collisions++
		} else {
			size += len(n)
		}
	}
	return map[string]int{"collisions": collisions, "mergedEntries": len(entries) + len(task) - collisions, "mergedNameValueBytesAtLeast": size}
}

// carrierVector applies read (verify or a pack) to the input: a reject
// must name the rule and position; an accepted verify its figures, a pack
// the carrier of its output file, which verify accepts.
func carrierVector(read func([]byte) (*envcarrier.Bundle, error)) procedure {
	return func(t *testing.T, v vector, input []byte) {
		b, err := read(input)
		verdict(t, v, err)
		if err != nil {
			var e *envcarrier.Error
			switch {
			case !errors.As(err, &e):
				t.Errorf("not a rule error: %v", err)
			case v.Where == nil || e.Where != *v.Where:
				t.Errorf("position %q, want %q", e.Where, deref(v.Where))
			}
			return
		}
		if v.Output != "" {
			if want := file(t, "env-bundle", v.Output); !bytes.Equal(b.Bytes(), want) {
				t.Fatalf("packed carrier:\n got %q\nwant %q", b.Bytes(), want)
			}
			if _, err := envcarrier.Parse(b.Bytes()); err != nil {
				t.Fatalf("verify refuses what pack wrote: %v", err)
			}
			carrierFigures(t, b.Bytes())
			return
		}
		got := map[string]int{"entries": b.Len(), "nameValueBytes": b.NameValueBytes(), "carrierBytes": b.Size()}
		want := carrierFigures(t, input)
		for name, inFile := range v.Figures {
			if want[name] != inFile || got[name] != inFile {
				t.Errorf("%s: vector file %d, recomputed %d, code %d", name, inFile, want[name], got[name])
			}
		}
		if len(v.Figures) != len(want) {
			t.Errorf("figures %v, recomputed %v", v.Figures, want)
		}
	}
}

// carrierFigures recomputes an accepted carrier's figures from its bytes,
// and checks it is its own RFC 8785 form and that the size formula of
// "Sizes" gives its length.
func carrierFigures(t *testing.T, data []byte) map[string]int {
	t.Helper()
	if c := canonical(t, data); !bytes.Equal(c, data) {
		t.Errorf("an accepted carrier is not its RFC 8785 form")
	}
	entries := jsonValue(t, data).(map[string]any)["entries"].([]any)
	payload, formula := 0, 55+23*len(entries)
	for _, e := range entries {
		name, value := e.(map[string]any)["name"].(string), e.(map[string]any)["value"].(string)
		payload += len(name) + len(value)
		formula += len(name) + escaped(value)
	}
	if formula != len(data) {
		t.Errorf("the size formula gives %d bytes, the carrier has %d", formula, len(data))
	}
	return map[string]int{"entries": len(entries), "nameValueBytes": payload, "carrierBytes": len(data)}
}

// escaped is docs/env-bundle.md's escaped(value): 2 bytes for " \ and the
// five short escapes, 6 for any other byte below 0x20, 1 for every other
// byte of the UTF-8.
func escaped(v string) int {
	n := 0
	for _, c := range []byte(v) {
		switch {
		case c == '"' || c == '\\' || c == '\b' || c == '\t' || c == '\n' || c == '\f' || c == '\r':
			n += 2
		case c < 0x20:
			n += 6
		default:
			n++
		}
	}
	return n
}

func deref(s *string) string {
	if s == nil {
		return "(none given)"
	}
	return *s
}
