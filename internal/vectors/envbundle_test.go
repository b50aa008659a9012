package vectors

import (
	"bytes"
	"errors"
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
	})
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
