package envcarrier

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// pack's JSON input: an object of strings.
func TestFromJSONObject(t *testing.T) {
	tests := []struct {
		name, in string
		want     []Entry
		rule     Rule
		where    string
	}{
		{name: "object", in: `{"SECRET_B": "2", "SECRET_A": "1"}`, want: []Entry{{"SECRET_B", "2"}, {"SECRET_A", "1"}}},
		{name: "escapes", in: `{"SECRET_A":"a\u00e9\n\ud83d\ude00"}`, want: []Entry{{"SECRET_A", "aé\n😀"}}},
		{name: "empty object", in: `{}`, want: []Entry{}},
		{name: "final newline", in: "{\"SECRET_A\":\"1\"}\n", want: []Entry{{"SECRET_A", "1"}}},
		{name: "array", in: `["SECRET"]`, rule: RuleShape},
		{name: "number value", in: `{"SECRET_A":"1","SECRET_B":2}`, rule: RuleShape, where: "member[1]"},
		{name: "object value", in: `{"SECRET_A":{"secret":"x"}}`, rule: RuleShape, where: "member[0]"},
		{name: "duplicate", in: `{"SECRET_A":"1","SECRET_A":"2"}`, rule: RuleDuplicateKey},
		{name: "duplicate by escape", in: `{"SECRET_A":"1","SECRET_\u0041":"2"}`, rule: RuleDuplicateKey},
		{name: "truncated", in: `{"SECRET_A":"secret`, rule: RuleJSON},
		{name: "trailing", in: `{"SECRET_A":"secret"} {}`, rule: RuleJSON},
		{name: "invalid UTF-8", in: "{\"SECRET_A\":\"secret\xc3\"}", rule: RuleUTF8},
		{name: "NUL escape", in: `{"SECRET_A":"secret\u0000"}`, rule: RuleNUL},
		{name: "lone surrogate", in: `{"SECRET_A":"secret\ud800x"}`, rule: RuleJSON},
		{name: "bad escape", in: `{"SECRET_A":"secret\q"}`, rule: RuleJSON},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FromJSONObject([]byte(tt.in))
			wantRule(t, err, tt.rule, tt.where)
			if err == nil && !slices.Equal(got, tt.want) {
				t.Fatalf("got %d entries, want %d (or values differ)", len(got), len(tt.want))
			}
		})
	}
}

// PackJSON sorts, and names members by their position in the document.
func TestPackJSON(t *testing.T) {
	b, err := PackJSON([]byte(`{"SECRET_B":"2","SECRET_A":"1"}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b.Bytes()), `{"entries":[{"name":"SECRET_A","value":"1"},{"name":"SECRET_B","value":"2"}],"schema":"qinglong/environment-bundle@v1"}`; got != want {
		t.Fatalf("carrier\n got %s\nwant %s", got, want)
	}
	_, err = PackJSON([]byte(`{"SECRET_A":"1","QL3_SECRET":"2"}`))
	wantRule(t, err, RuleReservedPrefix, "member[1]")
	_, err = PackJSON([]byte(`{}`))
	wantRule(t, err, RuleEntryCount, "")
}

// New sorts its entries and names duplicates by position.
func TestNew(t *testing.T) {
	b, err := New([]Entry{{"b", "3"}, {"B", "2"}, {"_", "4"}, {"A", "1"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Names(); !slices.Equal(got, []string{"A", "B", "_", "b"}) {
		t.Fatalf("Names = %v, want bytewise order A B _ b", got)
	}
	_, err = New([]Entry{{"SECRET_B", "1"}, {"SECRET_A", "2"}, {"SECRET_B", "3"}})
	wantRule(t, err, RuleDuplicateName, "entries[2]")
	if !strings.Contains(err.Error(), "entries[2]: the same name as entries[0]") {
		t.Fatalf("duplicate error: %v", err)
	}
	_, err = New([]Entry{{"SECRET_A", "secret\xff"}})
	wantRule(t, err, RuleUTF8, "entries[0]")
	_, err = New([]Entry{{"SECRET_A", "secret\x00"}})
	wantRule(t, err, RuleNUL, "entries[0]")
	_, err = New(nil)
	wantRule(t, err, RuleEntryCount, "")

	// The bundle owns its entries and carrier.
	in := []Entry{{"SECRET_A", "1"}}
	b, _ = New(in)
	in[0].Value = "2"
	b.Entries()[0].Value = "3"
	b.Bytes()[0] = 'x'
	if e := b.Entries()[0]; e.Value != "1" || b.Bytes()[0] != '{' {
		t.Fatalf("the bundle shares memory with its caller")
	}
}

// Nothing prints a name or a value: not an Entry, not a Bundle, not %#v.
func TestRedacted(t *testing.T) {
	b, err := New([]Entry{{"SECRET_A", "secret-value"}})
	if err != nil {
		t.Fatal(err)
	}
	e := b.Entries()[0]
	for _, s := range []string{
		fmt.Sprint(b), fmt.Sprintf("%v %+v %#v %s %q %x %X %d", b, b, b, b, b, b, b, b),
		fmt.Sprint(b.Entries()), fmt.Sprintf("%v %+v %#v %s %q %x %X %d %v %#v", e, e, e, e, e, e, e, e, b.Entries(), b.Entries()),
		fmt.Sprintf("%v %+v %d", *b, *b, *b),
	} {
		if strings.Contains(strings.ToLower(s), "secret") {
			t.Fatalf("printed a name or value: %s", s)
		}
	}
	if got, want := b.String(), fmt.Sprintf("environment bundle (1 entries, %d bytes)", b.Size()); got != want {
		t.Fatalf("String = %q", got)
	}
}

func TestParseNames(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
		rule     Rule
		where    string
	}{
		{name: "empty", in: ""},
		{name: "names", in: "SECRET_A\n# c\n\n  SECRET_B\t\nQL3_SECRET\n", want: []string{"SECRET_A", "SECRET_B", "QL3_SECRET"}},
		{name: "no final newline", in: "SECRET_A", want: []string{"SECRET_A"}},
		{name: "bad name", in: "SECRET_A\nSECRET-B\n", rule: RuleName, where: "line 2"},
		{name: "assignment", in: "SECRET_A=secret\n", rule: RuleName, where: "line 1"},
		{name: "two names on a line", in: "SECRET_A SECRET_B\n", rule: RuleName, where: "line 1"},
		{name: "duplicate", in: "SECRET_A\n\nSECRET_A\n", rule: RuleNamesFile, where: "line 3"},
		{name: "CRLF", in: "SECRET_A\r\n", rule: RuleNamesFile, where: "line 1"},
		{name: "NUL", in: "SECRET_A\nSECRET\x00\n", rule: RuleNUL, where: "line 2"},
		{name: "invalid UTF-8", in: "SECRET\xff\n", rule: RuleUTF8, where: "line 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseNames([]byte(tt.in))
			wantRule(t, err, tt.rule, tt.where)
			if err == nil && !slices.Equal(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// The merge check, at each bound and one past it.
func TestCheckMerge(t *testing.T) {
	names := func(prefix string, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("%s%03d", prefix, i)
		}
		return out
	}
	mustNew := func(entries []Entry) *Bundle {
		b, err := New(entries)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	small := mustNew(seq(200, "v")) // names V000…V199, 4+1 bytes each: 1000 bytes
	big := mustNew(payload(65500))  // 36 bytes left
	tests := []struct {
		name  string
		b     *Bundle
		task  []string
		want  MergeReport
		rules []Rule
	}{
		{"no task names", small, nil, MergeReport{200, 0, 0, 200, 1000}, nil},
		{"256 merged", small, names("T", 56), MergeReport{200, 56, 0, 256, 1000 + 56*4}, nil},
		{"257 merged", small, names("T", 57), MergeReport{200, 57, 0, 257, 1000 + 57*4}, []Rule{RuleMergedEntries}},
		{"collision", small, []string{"T", "V007", "V100"}, MergeReport{200, 3, 2, 201, 1001}, []Rule{RuleCollision}},
		{"65536 bytes", big, []string{"T12345678901234567890123456789012345"}, MergeReport{5, 1, 0, 6, 65536}, nil},
		{"65537 bytes", big, []string{"T123456789012345678901234567890123456"}, MergeReport{5, 1, 0, 6, 65537}, []Rule{RuleMergedNameValue}},
		{"collision and count", small, append(names("T", 57), "V000"), MergeReport{200, 58, 1, 257, 1000 + 57*4}, []Rule{RuleCollision, RuleMergedEntries}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CheckMerge(tt.b, tt.task)
			if got != tt.want {
				t.Fatalf("report %+v, want %+v", got, tt.want)
			}
			if len(tt.rules) == 0 {
				wantRule(t, err, "", "")
				return
			}
			wantRule(t, err, tt.rules[0], "")
			var e *Error
			errors.As(err, &e)
			if n := strings.Count(e.Msg, ";") + 1; n < len(tt.rules) {
				t.Fatalf("error lists %d problems, want %d: %v", n, len(tt.rules), err)
			}
		})
	}
}
