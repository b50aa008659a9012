package strictjson

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestObject(t *testing.T) {
	want := []string{"a", "b"}
	for _, tt := range []struct {
		in, err string
	}{
		{`{"a":1,"b":"x"}`, ""},
		{` {"b":"x","a":1} `, ""},
		{`[]`, "not a JSON object"},
		{``, "not a JSON object"},
		{"{\"a\":1,\"b\":\"\xff\"}", "not UTF-8"},
		{`{"a":1,"b":"x","a":2}`, `"a" appears twice`},
		{`{"a":1,"\u0062":"x","b":3}`, `"b" appears twice`},
		{`{"a":1,"b":"x","c":0}`, `unknown member "c"`},
		{`{"a":1}`, `"b" is missing`},
		{`{"a":1,"b":"x"} {}`, "data after"},
		{`{"a":1,"b":}`, "malformed JSON"},
	} {
		m, err := Object([]byte(tt.in), want)
		switch {
		case tt.err == "" && (err != nil || len(m) != 2):
			t.Errorf("%q: %v %v", tt.in, m, err)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%q: %v, want %q", tt.in, err, tt.err)
		}
	}
	if s, ok := String([]byte(`"x"`)); !ok || s != "x" {
		t.Error("String")
	}
	if _, ok := String([]byte(`1`)); ok {
		t.Error("String of a number")
	}
}

func FuzzObject(f *testing.F) {
	f.Add([]byte(`{"a":1,"b":"x"}`))
	f.Add([]byte(`{"a":1,"a":2}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Object(data, []string{"a", "b"})
		if err == nil && len(m) != 2 {
			t.Fatalf("accepted %q with %d members", data, len(m))
		}
	})
}

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		in, err string // err "" = accepted
	}{
		{`{"a":{"b":[1,{"c":2}]}}`, ""},
		{`{"a":1,"b":{"a":2}}`, ""}, // one name in two objects
		{`{"a":1,"a":2}`, `member "a" appears twice in one object`},
		{`{"a":{"b":1,"b":2}}`, `member "b" appears twice in one object`},
		{`[{"x":1},{"x":1,"x":1}]`, `member "x" appears twice in one object`},
		{`{} {}`, "more than one JSON value; a test file is one object"},
		{``, "empty; a test file is one JSON object"},
		{`{"a":[[[[1]]]]}`, "nested deeper than the test shape allows"},
		{`{"a":`, "not JSON: unexpected end of input"},
		{`{"a" 1}`, "not JSON: invalid character '1' after object key"},
	} {
		err := Check([]byte(c.in), 4, "test")
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != c.err {
			t.Errorf("Check(%q) = %q, want %q", c.in, got, c.err)
		}
	}
}

func FuzzCheck(f *testing.F) {
	f.Add([]byte(`{"a":{"b":[1,{"c":2}]}}`))
	f.Add([]byte(`{"a":1,"a":2}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if Check(data, 8, "fuzz") != nil {
			return
		}
		// Accepted: one JSON value that encoding/json also reads.
		var v any
		if err := json.Unmarshal(data, &v); err != nil {
			t.Fatalf("Check accepted %q, encoding/json refuses it: %v", data, err)
		}
	})
}
