package strictjson

import (
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
