package canon

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestDigestOfArray: the element-at-a-time digest is DigestOf of the whole
// array, byte for byte of what is hashed, on arrays whose canonical form
// reorders members, rewrites numbers and escapes, nests arrays, or is
// empty; and an element with no canonical form is refused naming it.
func TestDigestOfArray(t *testing.T) {
	for _, text := range []string{
		`[]`,
		`[null]`,
		`[{}]`,
		`[{"b":1,"a":[2,{"d":1e2,"c":"\u00e9"}]}]`,
		`[{"kind":"ConfigMap","data":{"z":"1","a":"\ud83d\ude00"}},{"kind":"Service","spec":{"ports":[{"port":80}]}}]`,
		`[1.0, -0, 1e-7, 123456789012345, "x", true, false, [[]], {"\u20ac":"€","$":"$"}]`,
	} {
		var items []any
		if err := json.Unmarshal([]byte(text), &items); err != nil {
			t.Fatal(err)
		}
		want, err := DigestOf(DomainRender, items)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DigestOfArray(DomainRender, items)
		if err != nil || got != want {
			t.Errorf("%s: DigestOfArray %s (%v), DigestOf %s", text, got, err, want)
		}
	}
	if got, err := DigestOfArray[any](DomainRender, nil); err != nil || got != DigestBytes(DomainRender, []byte("[]")) {
		t.Errorf("nil: %s (%v), want the digest of []", got, err)
	}
	_, err := DigestOfArray(DomainRender, []any{"ok", json.RawMessage(`"\ud800"`)})
	if err == nil || !strings.Contains(err.Error(), "element 1") {
		t.Errorf("a lone surrogate: %v, want a refusal naming element 1", err)
	}
}

// TestDigestOfMemberArray: an object holding the array among other
// members digests as DigestOf of the whole object, whatever the members'
// order, including when another member holds the placeholder itself.
func TestDigestOfMemberArray(t *testing.T) {
	items := []any{map[string]any{"b": 2, "a": "x"}, "y"}
	for _, obj := range []map[string]any{
		{},
		{"schema": "qinglong/diff@v1"},
		{"a": 1, "z": []any{"q"}, "objectz": map[string]any{"objects": []any{}}},
		{"schema": arrayPlaceholder},
		{"nested": map[string]any{"k": arrayPlaceholder}},
	} {
		whole := map[string]any{"objects": items}
		for k, v := range obj {
			whole[k] = v
		}
		want, err := DigestOf(DomainRender, whole)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DigestOfMemberArray(DomainRender, obj, "objects", items)
		if err != nil || got != want {
			t.Errorf("%v: %s (%v), want %s", obj, got, err, want)
		}
		if _, ok := obj["objects"]; ok {
			t.Errorf("%v: the caller's object was modified", obj)
		}
	}
	want, _ := DigestOf(DomainRender, map[string]any{"objects": []any{}, "schema": "s"})
	if got, err := DigestOfMemberArray[any](DomainRender, map[string]any{"schema": "s"}, "objects", nil); err != nil || got != want {
		t.Errorf("nil items: %s (%v), want the empty array's %s", got, err, want)
	}
}

// TestNewArrayDigestIn: the array may stand anywhere in the shell, nested
// in objects and arrays; a shell without the placeholder, or with it
// twice, is refused so that the caller digests the whole value.
func TestNewArrayDigestIn(t *testing.T) {
	items := []any{map[string]any{"b": 2, "a": "x"}, "y"}
	for _, tc := range []struct{ shell, whole any }{
		{ArrayPlaceholder, items},
		{map[string]any{"current": map[string]any{"inventory": ArrayPlaceholder, "version": "1"}, "z": 1},
			map[string]any{"current": map[string]any{"inventory": items, "version": "1"}, "z": 1}},
		{[]any{1, map[string]any{"x": ArrayPlaceholder}}, []any{1, map[string]any{"x": items}}},
	} {
		want, err := DigestOf(DomainRender, tc.whole)
		if err != nil {
			t.Fatal(err)
		}
		a, err := NewArrayDigestIn(DomainRender, tc.shell)
		if err != nil {
			t.Fatalf("%v: %v", tc.shell, err)
		}
		for _, item := range items {
			if _, err := a.Add(item); err != nil {
				t.Fatal(err)
			}
		}
		if got := a.Sum(); got != want {
			t.Errorf("%v: %s, want %s", tc.shell, got, want)
		}
	}
	for _, shell := range []any{map[string]any{"a": 1}, []any{ArrayPlaceholder, ArrayPlaceholder}} {
		if _, err := NewArrayDigestIn(DomainRender, shell); !errors.Is(err, ErrPlaceholderInShell) {
			t.Errorf("%v: %v, want ErrPlaceholderInShell", shell, err)
		}
	}
}

// FuzzDigestOfArray: for any JSON array, the element-at-a-time digest and
// the whole array's agree, or both refuse.
func FuzzDigestOfArray(f *testing.F) {
	for _, s := range []string{`[]`, `[{"b":1,"a":2}]`, `[1e21,"\u0000",{"":[]}]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		var raw []json.RawMessage
		if json.Unmarshal([]byte(text), &raw) != nil || raw == nil {
			return
		}
		want, werr := DigestOf(DomainRender, raw)
		got, gerr := DigestOfArray(DomainRender, raw)
		if (werr == nil) != (gerr == nil) || got != want {
			t.Fatalf("%q: DigestOfArray %s (%v), DigestOf %s (%v)", text, got, gerr, want, werr)
		}
		if werr == nil {
			a := NewArrayDigest(DomainRender)
			for i, item := range raw {
				c, err := a.Add(item)
				if want, _ := Canonical(item); err != nil || !bytes.Equal(c, want) {
					t.Fatalf("%q: ArrayDigest.Add of element %d gave %q (%v), want its canonical form %q", text, i, c, err, want)
				}
			}
			if sum := a.Sum(); sum != want {
				t.Fatalf("%q: ArrayDigest %s, DigestOf %s", text, sum, want)
			}
		}
		obj := map[string]any{"schema": text, "a": raw}
		want, werr = DigestOf(DomainRender, map[string]any{"schema": text, "a": raw, "objects": raw})
		got, gerr = DigestOfMemberArray(DomainRender, obj, "objects", raw)
		if (werr == nil) != (gerr == nil) || got != want {
			t.Fatalf("%q in an object: DigestOfMemberArray %s (%v), DigestOf %s (%v)", text, got, gerr, want, werr)
		}
	})
}
