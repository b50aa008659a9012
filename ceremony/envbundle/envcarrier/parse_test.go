package envcarrier

import (
	"strings"
	"testing"
)

const okCarrier = `{"entries":[{"name":"SECRET_A","value":"secret-a"},{"name":"SECRET_B","value":"secret-b"}],"schema":"qinglong/environment-bundle@v1"}`

// Every rule of Parse, with the rule and position it reports.
func TestParseRules(t *testing.T) {
	tail := `],"schema":"qinglong/environment-bundle@v1"}`
	one := func(entry string) string { return `{"entries":[` + entry + tail }
	tests := []struct {
		name, in string
		rule     Rule
		where    string
	}{
		{"valid", okCarrier, "", ""},
		{"valid escapes", one(`{"name":"SECRET_A","value":"secret\"\\\n\t\b\f\r\u0001\u001f<>&` + "\u2028\u00e9\U0001F600\x7f" + `"}`), "", ""},
		{"empty", "", RuleJSON, ""},
		{"white space only", " \n", RuleJSON, ""},
		{"byte order mark", "\xef\xbb\xbf" + okCarrier, RuleJSON, "byte 0"},
		{"invalid UTF-8", one(`{"name":"SECRET_A","value":"secret` + "\xff" + `"}`), RuleUTF8, "byte 46"},
		{"NUL byte", one(`{"name":"SECRET_A","value":"secret` + "\x00" + `"}`), RuleNUL, "byte 46"},
		{"NUL escape in value", one(`{"name":"SECRET_A","value":"secret\u0000"}`), RuleNUL, "byte 46"},
		{"NUL escape in unknown member", `{"entries":[],"x\u0000":1}`, RuleNUL, "byte 16"},
		{"truncated", okCarrier[:40], RuleJSON, "byte 40"},
		{"trailing text", okCarrier + "x", RuleJSON, at(len(okCarrier))},
		{"two values", okCarrier + okCarrier, RuleJSON, at(len(okCarrier))},
		{"raw control character", one(`{"name":"SECRET_A","value":"secret` + "\n" + `"}`), RuleJSON, "byte 46"},
		{"unknown escape", one(`{"name":"SECRET_A","value":"secret\x"}`), RuleJSON, "byte 46"},
		{"lone high surrogate", one(`{"name":"SECRET_A","value":"secret\ud800"}`), RuleJSON, "byte 46"},
		{"lone low surrogate", one(`{"name":"SECRET_A","value":"secret\udc00"}`), RuleJSON, "byte 46"},
		{"reversed surrogates", one(`{"name":"SECRET_A","value":"\udc00\ud800"}`), RuleJSON, "byte 40"},
		{"surrogate pair escape", one(`{"name":"SECRET_A","value":"\ud83d\ude00"}`), RuleCanonical, ""},
		{"single quotes", `{'entries':[]}`, RuleJSON, "byte 1"},
		{"leading zero", `{"entries":01}`, RuleJSON, "byte 12"},
		{"too deep", `{"x":` + strings.Repeat("[", 20) + strings.Repeat("]", 20) + `}`, RuleJSON, "byte 20"},
		{"duplicate top member", `{"entries":[],"entries":[]}`, RuleDuplicateKey, "byte 14"},
		{"duplicate entry member", one(`{"name":"SECRET_A","name":"SECRET_B","value":""}`), RuleDuplicateKey, ""},
		{"duplicate member by escape", one(`{"name":"SECRET_A","n\u0061me":"SECRET_B","value":""}`), RuleDuplicateKey, ""},
		{"array", `[]`, RuleShape, ""},
		{"string", `"secret"`, RuleShape, ""},
		{"unknown top member", `{"entries":[{"name":"SECRET_A","value":""}],"schema":"qinglong/environment-bundle@v1","secret":1}`, RuleShape, ""},
		{"no schema", `{"entries":[{"name":"SECRET_A","value":""}]}`, RuleShape, ""},
		{"other schema", `{"entries":[{"name":"SECRET_A","value":""}],"schema":"secret@v2"}`, RuleSchema, "schema"},
		{"schema not a string", `{"entries":[{"name":"SECRET_A","value":""}],"schema":1}`, RuleSchema, "schema"},
		{"no entries", `{"schema":"qinglong/environment-bundle@v1"}`, RuleShape, ""},
		{"entries an object", `{"entries":{},"schema":"qinglong/environment-bundle@v1"}`, RuleShape, "entries"},
		{"zero entries", `{"entries":[],"schema":"qinglong/environment-bundle@v1"}`, RuleEntryCount, ""},
		{"entry not an object", one(`"SECRET_A=secret"`), RuleShape, "entries[0]"},
		{"entry unknown member", one(`{"name":"SECRET_A","secret":"","value":""}`), RuleShape, "entries[0]"},
		{"entry no name", one(`{"value":"secret"}`), RuleShape, "entries[0]"},
		{"entry no value", one(`{"name":"SECRET_A"}`), RuleShape, "entries[0]"},
		{"value a number", one(`{"name":"SECRET_A","value":1}`), RuleShape, "entries[0]"},
		{"value null", one(`{"name":"SECRET_A","value":null}`), RuleShape, "entries[0]"},
		{"name an array", one(`{"name":["SECRET_A"],"value":""}`), RuleShape, "entries[0]"},
		{"empty name", one(`{"name":"","value":"secret"}`), RuleName, "entries[0]"},
		{"name starts with a digit", one(`{"name":"1SECRET","value":""}`), RuleName, "entries[0]"},
		{"name with a dash", one(`{"name":"SECRET-A","value":""}`), RuleName, "entries[0]"},
		{"name with a space", one(`{"name":"SECRET A","value":""}`), RuleName, "entries[0]"},
		{"name not ASCII", one(`{"name":"SECRET_\u00e9","value":""}`), RuleName, "entries[0]"},
		{"name with a newline", one(`{"name":"SECRET_A\n","value":""}`), RuleName, "entries[0]"},
		{"reserved prefix", one(`{"name":"QL3_SECRET","value":""}`), RuleReservedPrefix, "entries[0]"},
		{"reserved prefix alone", one(`{"name":"QL3_","value":""}`), RuleReservedPrefix, "entries[0]"},
		{"QL3 without underscore", one(`{"name":"QL3SECRET","value":""}`), "", ""},
		{"lower-case ql3_", one(`{"name":"ql3_secret","value":""}`), "", ""},
		{"unsorted", `{"entries":[{"name":"SECRET_B","value":""},{"name":"SECRET_A","value":""}],"schema":"qinglong/environment-bundle@v1"}`, RuleOrder, "entries[1]"},
		{"lower case sorts after upper", `{"entries":[{"name":"secret_a","value":""},{"name":"SECRET_B","value":""}],"schema":"qinglong/environment-bundle@v1"}`, RuleOrder, "entries[1]"},
		{"underscore between cases", `{"entries":[{"name":"SECRET_Z","value":""},{"name":"SECRET__","value":""},{"name":"SECRET_a","value":""}],"schema":"qinglong/environment-bundle@v1"}`, "", ""},
		{"duplicate name", `{"entries":[{"name":"SECRET_A","value":"1"},{"name":"SECRET_A","value":"2"}],"schema":"qinglong/environment-bundle@v1"}`, RuleDuplicateName, "entries[1]"},
		{"schema member first", `{"schema":"qinglong/environment-bundle@v1","entries":[{"name":"SECRET_A","value":""}]}`, RuleCanonical, "byte 2"},
		{"value member first", one(`{"value":"","name":"SECRET_A"}`), RuleCanonical, "byte 14"},
		{"white space", strings.Replace(okCarrier, ",", ", ", 1), RuleCanonical, ""},
		{"final newline", okCarrier + "\n", RuleCanonical, at(len(okCarrier))},
		{"escaped letter", one(`{"name":"SECRET_A","value":"\u0061"}`), RuleCanonical, ""},
		{"escaped solidus", one(`{"name":"SECRET_A","value":"\/"}`), RuleCanonical, ""},
		{"upper-case hex escape", one(`{"name":"SECRET_A","value":"\u001F"}`), RuleCanonical, ""},
		{"escaped newline as u", one(`{"name":"SECRET_A","value":"\u000a"}`), RuleCanonical, ""},
		{"escaped DEL", one(`{"name":"SECRET_A","value":"\u007f"}`), RuleCanonical, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := Parse([]byte(tt.in))
			wantRule(t, err, tt.rule, tt.where)
			if err == nil {
				if string(b.Bytes()) != tt.in {
					t.Fatalf("Bytes() differs from the accepted input")
				}
				if b.Size() != len(tt.in) {
					t.Fatalf("Size() = %d, want %d", b.Size(), len(tt.in))
				}
			}
		})
	}
}

// Each bound at its limit and one past it, for Parse and for New. Every
// bound can be reached with all the others kept: docs/env-bundle.md,
// "Bounds".
func TestBounds(t *testing.T) {
	tests := []struct {
		name    string
		entries []Entry
		rule    Rule
	}{
		{"1 entry", seq(1, ""), ""},
		{"256 entries", seq(256, "v"), ""},
		{"257 entries", seq(257, "v"), RuleEntryCount},
		{"value 16384 bytes", []Entry{{"A", strings.Repeat("v", 16384)}}, ""},
		{"value 16385 bytes", []Entry{{"A", strings.Repeat("v", 16385)}}, RuleValueSize},
		{"value 16384 bytes of 2-byte characters", []Entry{{"A", strings.Repeat("é", 8192)}}, ""},
		{"value 16386 bytes of 2-byte characters", []Entry{{"A", strings.Repeat("é", 8193)}}, RuleValueSize},
		{"names and values 65536 bytes", payload(65536), ""},
		{"names and values 65537 bytes", payload(65537), RuleNameValueSize},
		{"carrier 98304 bytes", carrierOf(98304), ""},
		{"carrier 98305 bytes", carrierOf(98305), RuleCarrierSize},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := raw(t, tt.entries...)
			b, err := Parse(data)
			wantRule(t, err, tt.rule, "")
			b2, err2 := New(tt.entries)
			wantRule(t, err2, tt.rule, "")
			if err != nil {
				return
			}
			if string(b2.Bytes()) != string(data) || b.Len() != len(tt.entries) {
				t.Fatalf("New and Parse disagree")
			}
			nv := 0
			for _, e := range tt.entries {
				nv += len(e.Name) + len(e.Value)
			}
			if b.NameValueBytes() != nv || b2.NameValueBytes() != nv {
				t.Fatalf("NameValueBytes = %d, %d, want %d", b.NameValueBytes(), b2.NameValueBytes(), nv)
			}
		})
	}
	// The fixtures sit exactly on the bounds they test.
	if n := len(raw(t, carrierOf(98304)...)); n != 98304 {
		t.Fatalf("carrierOf(98304) is %d bytes", n)
	}
	if n := len(raw(t, carrierOf(98305)...)); n != 98305 {
		t.Fatalf("carrierOf(98305) is %d bytes", n)
	}
	if nv := len(payload(65537)[0].Value) * 4; nv != 65536 {
		t.Fatalf("payload(65537) values: %d", nv)
	}
}

// The carrier-size bound fires first in Parse: on the input's length,
// before anything else is read.
func TestParseRuleOrder(t *testing.T) {
	big := raw(t, carrierOf(98305)...)
	big[10] = 0xff // invalid UTF-8 too
	_, err := Parse(big)
	wantRule(t, err, RuleCarrierSize, "")

	// Entry count before the entries' own rules.
	many := seq(257, "")
	many[3].Name = "1BAD"
	_, err = Parse(raw(t, many...))
	wantRule(t, err, RuleEntryCount, "")
	_, err = New(many)
	wantRule(t, err, RuleEntryCount, "")

	// Entry rules in index order before the total.
	over := payload(65537)
	over[2].Name = "QL3_C"
	over[4].Name = "1E"
	_, err = Parse(raw(t, over...))
	wantRule(t, err, RuleReservedPrefix, "entries[2]")

	// An entry's own rules before its order.
	_, err = Parse(raw(t, Entry{"B", ""}, Entry{"A", strings.Repeat("v", 16385)}))
	wantRule(t, err, RuleValueSize, "entries[1]")
}

// The documented size formula: 55 + 23n + names + escaped values.
func TestCarrierSizeFormula(t *testing.T) {
	for _, entries := range [][]Entry{seq(1, ""), seq(256, "xyz"), payload(100), carrierOf(500), {{"A", "\"\\\n\x01é"}}} {
		b, err := New(entries)
		if err != nil {
			t.Fatal(err)
		}
		want := carrierOverhead(len(entries))
		for _, e := range entries {
			want += len(e.Name) + escapedLen(e.Value)
		}
		if b.Size() != want {
			t.Fatalf("%d entries: carrier %d bytes, formula %d", len(entries), b.Size(), want)
		}
	}
}

// escapedLen is the documented length of a value inside the carrier.
func escapedLen(v string) int {
	n := 0
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t':
			n += 2
		case c < 0x20:
			n += 6
		default:
			n++
		}
	}
	return n
}
