package envcarrier

import (
	"slices"
	"strings"
	"testing"

	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

// FuzzParse: Parse never panics; what it accepts is byte-identical to its
// RFC 8785 canonical form (as inventory/canon computes it) and to
// Bytes(), obeys every bound, and New rebuilds the same carrier from its
// entries.
func FuzzParse(f *testing.F) {
	f.Add([]byte(okCarrier))
	f.Add(raw(f, Entry{"A", "\"\\\n\x01é\u2028😀"}))
	f.Add(raw(f, seq(3, "v")...))
	f.Add([]byte(`{"entries":[{"name":"A","name":"B","value":""}],"schema":"qinglong/environment-bundle@v1"}`))
	f.Add([]byte(`{"entries":[{"name":"A","value":"\ud800"}],"schema":"qinglong/environment-bundle@v1"}`))
	f.Add([]byte(`{"schema":"qinglong/environment-bundle@v1","entries":[{"name":"A","value":""}]}`))
	f.Add([]byte(`{"entries":[{"name":"B","value":""},{"name":"A","value":""}],"schema":"qinglong/environment-bundle@v1"}`))
	f.Add([]byte(`[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]`))
	f.Add([]byte(`{"entries":[{"name":"A","value":-0.5e+3}],"schema":"qinglong/environment-bundle@v1"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := Parse(data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "environment bundle: ") {
				t.Fatalf("unexpected error form: %v", err)
			}
			return
		}
		c, err := canon.CanonicalizeJSON(data)
		if err != nil || string(c) != string(data) {
			t.Fatalf("accepted input is not its own canonical form (%v)", err)
		}
		if string(b.Bytes()) != string(data) {
			t.Fatal("Bytes() differs from the accepted input")
		}
		entries := b.Entries()
		if len(entries) < 1 || len(entries) > MaxEntries || len(data) > MaxCarrierBytes || b.NameValueBytes() > MaxNameValueBytes {
			t.Fatal("accepted a bundle out of bounds")
		}
		for i, e := range entries {
			if !nameRE.MatchString(e.Name) || strings.HasPrefix(e.Name, ReservedPrefix) || len(e.Value) > MaxValueBytes || strings.IndexByte(e.Value, 0) >= 0 {
				t.Fatalf("entries[%d] breaks an entry rule", i)
			}
			if i > 0 && entries[i-1].Name >= e.Name {
				t.Fatalf("entries[%d] out of order", i)
			}
		}
		shuffled := slices.Clone(entries)
		slices.Reverse(shuffled)
		b2, err := New(shuffled)
		if err != nil || string(b2.Bytes()) != string(data) {
			t.Fatalf("New(entries) = %v, or a different carrier", err)
		}
	})
}

// FuzzFromDotenv: never panics; accepted lines are numbered in order and
// their names are name-shaped; errors name a line.
func FuzzFromDotenv(f *testing.F) {
	f.Add([]byte("export A='x'\n# c\nB=\"a\\n\\$\"  # d\nC=plain\n"))
	f.Add([]byte("A= \nB=#\nC='\nD=\"\\q\"\n"))
	f.Add([]byte("\xef\xbb\xbfA=1\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, lines, err := FromDotenv(data)
		if err != nil {
			if !strings.Contains(err.Error(), ": line ") {
				t.Fatalf("error names no line: %v", err)
			}
			return
		}
		if len(entries) != len(lines) || !slices.IsSorted(lines) {
			t.Fatalf("%d entries, lines %v", len(entries), lines)
		}
		for _, e := range entries {
			if e.Name == "" || strings.Trim(e.Name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") != "" {
				t.Fatal("a name with a character outside [A-Za-z0-9_]")
			}
		}
		if b, err := build(entries, func(i int) string { return "" }); err == nil {
			if _, err := Parse(b.Bytes()); err != nil {
				t.Fatalf("Parse(pack) = %v", err)
			}
		}
	})
}

// FuzzFromJSONObject: never panics; whatever packs also parses.
func FuzzFromJSONObject(f *testing.F) {
	f.Add([]byte(`{"B":"2","A":"1"}`))
	f.Add([]byte(`{"A":"1","A":"2"}`))
	f.Add([]byte(`{"A":1}`))
	f.Add([]byte(`{"A":"\ud83d\ude00\u0001"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := PackJSON(data)
		if err != nil {
			return
		}
		b2, err := Parse(b.Bytes())
		if err != nil {
			t.Fatalf("Parse(PackJSON) = %v", err)
		}
		if !slices.Equal(b.Entries(), b2.Entries()) {
			t.Fatal("round trip changed the entries")
		}
	})
}

// FuzzParseNames: never panics; accepted names are valid and distinct.
func FuzzParseNames(f *testing.F) {
	f.Add([]byte("A\n# c\n\n B \nQL3_X\n"))
	f.Add([]byte("A\nA\n"))
	f.Add([]byte("A=1\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		names, err := ParseNames(data)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, n := range names {
			if !nameRE.MatchString(n) || seen[n] {
				t.Fatal("an invalid or repeated name")
			}
			seen[n] = true
		}
	})
}
