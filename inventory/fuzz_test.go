package inventory

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// FuzzCanonical: canonical JSON is valid JSON, idempotent, and means what
// its input meant.
func FuzzCanonical(f *testing.F) {
	for _, s := range []string{
		`{}`, `[]`, `null`, `0`, `-0`, `1e21`, `1E-7`, `123456789012345678901234567890`, `0.1`,
		`"\u00e9\ud83d\ude00\u0000\u001f\"\\/"`, `{"b":1,"a":[1.5,"x",null,true,false]}`,
		`{"\u20ac":1,"\r":2,"1":3,"\u0080":4,"a":{"z":[],"y":{}}}`, ` [ 1 , { "a" : "b" } ] `,
		`{"a":1,"a":2}`,
	} {
		f.Add([]byte(s))
	}
	l, _ := fixtureLock(f, "v3.0.0", "3.0.0")
	c, err := Canonical(l)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(c)
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			return
		}
		c, err := CanonicalizeJSON(data)
		if err != nil {
			return // rejected (duplicate member names, numbers out of range): fine
		}
		if !json.Valid(c) {
			t.Fatalf("canonical form of %q is not JSON: %q", data, c)
		}
		c2, err := CanonicalizeJSON(c)
		if err != nil || !bytes.Equal(c, c2) {
			t.Fatalf("not idempotent: %q -> %q -> %q (%v)", data, c, c2, err)
		}
		var a, b any
		if err := json.Unmarshal(data, &a); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(c, &b); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("meaning changed: %q -> %q", data, c)
		}
	})
}

// FuzzParseLock: ParseLock never panics and only fails "invalid"; a lock it
// accepts re-encodes canonically and parses back equal.
func FuzzParseLock(f *testing.F) {
	l, _ := fixtureLock(f, "v3.1.0", "3.1.0")
	good, err := l.Marshal()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	j, _ := json.Marshal(l)
	f.Add(j)
	// A consistent lock listing the Head, and one with the Head's field manager.
	head := *l
	head.Render.Inventory = append(append([]Identity(nil), l.Render.Inventory...), Identity{APIVersion: "v1", Kind: "ConfigMap", Namespace: l.Target.Namespace, Name: HeadName})
	SortIdentities(head.Render.Inventory)
	head.Render.Count = len(head.Render.Inventory)
	head.Render.InventoryDigest, _ = InventoryDigest(head.Render.Inventory)
	headLock, _ := head.Marshal()
	f.Add(headLock)
	f.Add(bytes.Replace(good, []byte("fieldManager: "+FieldManager), []byte("fieldManager: "+HeadFieldManager), 1))
	for _, s := range []string{"", "{}", "- x", "schema: 1", "release: {version: 3.0.0}", "images: [a, a]", "a: &x [*x]",
		"render:\n  count: 1e99\n", "target: {namespace: yes}\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := ParseLock(data)
		if err != nil {
			if !fail.Is(err, fail.Invalid) {
				t.Fatalf("error class %s: %v", fail.ClassOf(err), err)
			}
			return
		}
		for _, id := range l.Render.Inventory {
			if IsHead(id) {
				t.Fatalf("accepted a lock listing the Head %s", id)
			}
		}
		if l.Tool.FieldManager == HeadFieldManager {
			t.Fatalf("accepted tool.fieldManager %q", l.Tool.FieldManager)
		}
		out, err := l.Marshal()
		if err != nil {
			t.Fatalf("marshal accepted lock: %v", err)
		}
		back, err := ParseLock(out)
		if err != nil {
			t.Fatalf("re-parse:\n%s\n%v", out, err)
		}
		if diff := cmp.Diff(l, back); diff != "" {
			t.Fatalf("round trip (-first +second):\n%s", diff)
		}
		again, _ := back.Marshal()
		if !bytes.Equal(out, again) {
			t.Fatalf("encoding not stable:\n%s\n%s", out, again)
		}
		d1, err1 := l.Digest()
		d2, err2 := back.Digest()
		if err1 != nil || err2 != nil || d1 != d2 {
			t.Fatalf("digests %s %s (%v %v)", d1, d2, err1, err2)
		}
	})
}

func TestCanonicalizeJSONRejects(t *testing.T) {
	for _, in := range []string{
		`"\ud800"`, `"\ud800\u0000"`, `"\udc00\ud800"`, `{"\ud83d":1}`, "\"\xff\"", `{"a":1,"a":2}`, `{"a":1`, `[1,]`, `1e400`,
	} {
		if out, err := CanonicalizeJSON([]byte(in)); err == nil {
			t.Errorf("CanonicalizeJSON(%q) = %q, want an error", in, out)
		}
	}
	for in, want := range map[string]string{
		`"\ud83d\ude00"`:          "\"\U0001F600\"",
		`"\\ud800"`:               `"\\ud800"`,
		`{"b":[1.0,2e0],"a":"é"}`: `{"a":"é","b":[1,2]}`,
	} {
		if out, err := CanonicalizeJSON([]byte(in)); err != nil || string(out) != want {
			t.Errorf("CanonicalizeJSON(%q) = %q, %v; want %q", in, out, err, want)
		}
	}
}
