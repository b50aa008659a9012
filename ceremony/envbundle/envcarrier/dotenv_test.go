package envcarrier

import (
	"slices"
	"strings"
	"testing"
)

// The dotenv subset: what it reads, and every ambiguity it refuses.
func TestFromDotenv(t *testing.T) {
	tests := []struct {
		name, in string
		want     []Entry
		lines    []int
		rule     Rule
		where    string
	}{
		{name: "empty file", in: ""},
		{name: "comments and blank lines", in: "# SECRET=1\n\n   \n\t# x\n"},
		{name: "unquoted", in: "SECRET_A=secret-a\n", want: []Entry{{"SECRET_A", "secret-a"}}, lines: []int{1}},
		{name: "no final newline", in: "SECRET_A=x", want: []Entry{{"SECRET_A", "x"}}, lines: []int{1}},
		{name: "empty value", in: "SECRET_A=\n", want: []Entry{{"SECRET_A", ""}}, lines: []int{1}},
		{name: "empty value and comment", in: "SECRET_A= # note\n", want: []Entry{{"SECRET_A", ""}}, lines: []int{1}},
		{name: "comment after a value", in: "SECRET_A=x  # note\n", want: []Entry{{"SECRET_A", "x"}}, lines: []int{1}},
		{name: "export prefix", in: "export SECRET_A=x\nexport\tSECRET_B='y'\n", want: []Entry{{"SECRET_A", "x"}, {"SECRET_B", "y"}}, lines: []int{1, 2}},
		{name: "a variable named export", in: "export=x\n", want: []Entry{{"export", "x"}}, lines: []int{1}},
		{name: "leading blanks", in: "  \tSECRET_A=x\n", want: []Entry{{"SECRET_A", "x"}}, lines: []int{1}},
		{name: "equals and colons in a value", in: "SECRET_A=a=b:c==\n", want: []Entry{{"SECRET_A", "a=b:c=="}}, lines: []int{1}},
		{name: "UTF-8 value", in: "SECRET_A=é😀\n", want: []Entry{{"SECRET_A", "é😀"}}, lines: []int{1}},
		{name: "single quotes are literal", in: `SECRET_A='a "b" \n $c #d'` + "\n", want: []Entry{{"SECRET_A", `a "b" \n $c #d`}}, lines: []int{1}},
		{name: "double quote escapes", in: `SECRET_A="a\\b\"c\nd\re\tf\$g\` + "`" + `h 'i' #j"` + "\n", want: []Entry{{"SECRET_A", "a\\b\"c\nd\re\tf$g`h 'i' #j"}}, lines: []int{1}},
		{name: "tab inside quotes", in: "SECRET_A='a\tb'\n", want: []Entry{{"SECRET_A", "a\tb"}}, lines: []int{1}},
		{name: "line numbers skip comments", in: "# c\n\nSECRET_A=1\n# d\nSECRET_B=2\n", want: []Entry{{"SECRET_A", "1"}, {"SECRET_B", "2"}}, lines: []int{3, 5}},
		{name: "byte order mark", in: "\xef\xbb\xbfSECRET_A=1\n", rule: RuleDotenv, where: "line 1"},
		{name: "invalid UTF-8", in: "SECRET_A=1\nSECRET_B=secret\xff\n", rule: RuleUTF8, where: "line 2"},
		{name: "NUL", in: "SECRET_A=1\n\nSECRET_B=secret\x00\n", rule: RuleNUL, where: "line 3"},
		{name: "CRLF", in: "SECRET_A=secret\r\n", rule: RuleDotenv, where: "line 1"},
		{name: "no equals", in: "SECRET_A\n", rule: RuleDotenv, where: "line 1"},
		{name: "space before equals", in: "SECRET_A =secret\n", rule: RuleDotenv, where: "line 1"},
		{name: "space after equals", in: "SECRET_A= secret\n", rule: RuleDotenv, where: "line 1"},
		{name: "no name", in: "=secret\n", rule: RuleDotenv, where: "line 1"},
		{name: "dash in name", in: "SECRET-A=secret\n", rule: RuleDotenv, where: "line 1"},
		{name: "dot in name", in: "SECRET.A=secret\n", rule: RuleDotenv, where: "line 1"},
		{name: "command", in: "echo secret\n", rule: RuleDotenv, where: "line 1"},
		{name: "two words", in: "SECRET_A=secret more\n", rule: RuleDotenv, where: "line 1"},
		{name: "hash in unquoted value", in: "SECRET_A=secret#1\n", rule: RuleDotenv, where: "line 1"},
		{name: "unquoted value starting with hash", in: "SECRET_A=#secret\n", rule: RuleDotenv, where: "line 1"},
		{name: "dollar in unquoted value", in: "SECRET_A=$SECRET\n", rule: RuleDotenv, where: "line 1"},
		{name: "backslash in unquoted value", in: "SECRET_A=secret\\\n", rule: RuleDotenv, where: "line 1"},
		{name: "quote inside unquoted value", in: "SECRET_A=sec'ret'\n", rule: RuleDotenv, where: "line 1"},
		{name: "backtick in unquoted value", in: "SECRET_A=`secret`\n", rule: RuleDotenv, where: "line 1"},
		{name: "control character unquoted", in: "SECRET_A=secret\x01\n", rule: RuleDotenv, where: "line 1"},
		{name: "control character single-quoted", in: "SECRET_A='secret\x01'\n", rule: RuleDotenv, where: "line 1"},
		{name: "control character double-quoted", in: "SECRET_A=\"secret\x1b\"\n", rule: RuleDotenv, where: "line 1"},
		// docs/env-bundle.md: a control character is a byte below 0x20; DEL
		// (0x7F) and U+0080-U+009F are ordinary characters of a value.
		{name: "DEL is not a control character", in: "SECRET_A=a\x7fb\nSECRET_B=\"c\x7f\"\n", want: []Entry{{"SECRET_A", "a\x7fb"}, {"SECRET_B", "c\x7f"}}, lines: []int{1, 2}},
		{name: "C1 is not a control character", in: "SECRET_A=a\u0085b\n", want: []Entry{{"SECRET_A", "a\u0085b"}}, lines: []int{1}},
		{name: "unterminated single quote", in: "SECRET_A='secret\nmore'\n", rule: RuleDotenv, where: "line 1"},
		{name: "unterminated double quote", in: "SECRET_A=\"secret\nmore\"\n", rule: RuleDotenv, where: "line 1"},
		{name: "trailing backslash in quotes", in: "SECRET_A=\"secret\\\n", rule: RuleDotenv, where: "line 1"},
		{name: "unknown escape", in: `SECRET_A="secret\x"` + "\n", rule: RuleDotenv, where: "line 1"},
		{name: "dollar in double quotes", in: `SECRET_A="${SECRET}"` + "\n", rule: RuleDotenv, where: "line 1"},
		{name: "backtick in double quotes", in: "SECRET_A=\"`secret`\"\n", rule: RuleDotenv, where: "line 1"},
		{name: "concatenated quotes", in: `SECRET_A='secret'"more"` + "\n", rule: RuleDotenv, where: "line 1"},
		{name: "text after quotes", in: `SECRET_A="secret" more` + "\n", rule: RuleDotenv, where: "line 1"},
		{name: "comment glued to quotes", in: `SECRET_A="secret"#more` + "\n", rule: RuleDotenv, where: "line 1"},
		{name: "error on a later line", in: "SECRET_A=1\n# c\nSECRET_B = 2\n", rule: RuleDotenv, where: "line 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, lines, err := FromDotenv([]byte(tt.in))
			wantRule(t, err, tt.rule, tt.where)
			if err != nil {
				return
			}
			if !slices.Equal(got, tt.want) || !slices.Equal(lines, tt.lines) {
				t.Fatalf("got %d entries at lines %v, want %d at %v (values differ: %v)", len(got), lines, len(tt.want), tt.lines, !slices.Equal(got, tt.want))
			}
		})
	}
}

// PackDotenv names the line of an entry that breaks an entry rule.
func TestPackDotenv(t *testing.T) {
	tests := []struct {
		name, in string
		rule     Rule
		where    string
	}{
		{"valid", "SECRET_B=2\nSECRET_A=1\n", "", ""},
		{"no entries", "# only a comment\n", RuleEntryCount, ""},
		{"name starting with a digit", "SECRET_A=1\n\n1SECRET=2\n", RuleName, "line 3 (entry 1)"},
		{"reserved prefix", "# c\nQL3_SECRET=1\n", RuleReservedPrefix, "line 2 (entry 0)"},
		{"duplicate", "SECRET_A=1\nSECRET_B=2\nexport SECRET_A=3\n", RuleDuplicateName, "line 3 (entry 2)"},
		// duplicate-name is checked after every entry's own rules
		// (docs/env-bundle.md, pack step 3): a bad name on a later line
		// is reported before an earlier duplicate.
		{"duplicate before a bad name", "SECRET_A=1\nSECRET_A=2\n1SECRET=3\n", RuleName, "line 3 (entry 2)"},
		{"value too long", "SECRET_A=" + strings.Repeat("s", 16385) + "\n", RuleValueSize, "line 1 (entry 0)"},
		{"257 entries", strings.Repeat("SECRET_A=1\n", 1) + dotenvSeq(256), RuleEntryCount, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := PackDotenv([]byte(tt.in))
			wantRule(t, err, tt.rule, tt.where)
			if err == nil {
				if _, err := Parse(b.Bytes()); err != nil {
					t.Fatalf("Parse(PackDotenv) = %v", err)
				}
				if !slices.IsSorted(b.Names()) {
					t.Fatalf("names not sorted")
				}
			}
		})
	}
	_, err := PackDotenv([]byte("SECRET_A=1\nSECRET_B=2\nexport SECRET_A=3\n"))
	if !strings.Contains(err.Error(), "line 3 (entry 2): the same name as line 1 (entry 0)") {
		t.Fatalf("duplicate error names the wrong lines: %v", err)
	}
}

func dotenvSeq(n int) string {
	var b strings.Builder
	for _, e := range seq(n, "v") {
		b.WriteString(e.Name + "=" + e.Value + "\n")
	}
	return b.String()
}
