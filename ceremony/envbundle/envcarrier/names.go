package envcarrier

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ParseNames reads a names file: the names of a task's own environment
// variables, one per line. Blank lines and lines whose first non-blank
// character is '#' are skipped; spaces and tabs around a name are
// ignored. Every name must match ^[A-Za-z_][A-Za-z0-9_]*$ (the reserved
// prefix QL3_ is allowed: the platform's variables are the task's) and
// appear once. Errors name the line, never the name.
func ParseNames(data []byte) ([]string, error) {
	if !utf8.Valid(data) {
		return nil, invalid(RuleUTF8, lineAt(data, firstInvalidUTF8(data)), "not valid UTF-8")
	}
	if i := bytes.IndexByte(data, 0); i >= 0 {
		return nil, invalid(RuleNUL, lineAt(data, i), "a NUL byte")
	}
	var names []string
	seen := map[string]int{}
	text := strings.TrimSuffix(string(data), "\n")
	if text == "" {
		return nil, nil
	}
	for i, line := range strings.Split(text, "\n") {
		where := fmt.Sprintf("line %d", i+1)
		if strings.IndexByte(line, '\r') >= 0 {
			return nil, invalid(RuleNamesFile, where, "a carriage return; save the file with LF line endings")
		}
		s := strings.Trim(line, " \t")
		if s == "" || s[0] == '#' {
			continue
		}
		if !nameRE.MatchString(s) {
			return nil, invalid(RuleName, where, "not a shell variable name: it must match ^[A-Za-z_][A-Za-z0-9_]*$, one name per line")
		}
		if j, dup := seen[s]; dup {
			return nil, invalid(RuleNamesFile, where, "the same name as line %d; list each name once", j)
		}
		seen[s] = i + 1
		names = append(names, s)
	}
	return names, nil
}
