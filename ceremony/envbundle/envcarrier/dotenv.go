package envcarrier

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"
)

// FromDotenv reads the documented dotenv subset (docs/env-bundle.md,
// "Dotenv input"): one NAME=value assignment per line, an optional
// "export " prefix, blank lines and # comment lines, unquoted,
// 'single-quoted' or "double-quoted" values with the escapes \\ \" \n \r
// \t \$ and \`. Anything a shell or another dotenv reader could read
// differently is an error naming the line. It returns the entries in file
// order and, for each, its 1-based line number.
//
// FromDotenv only reads syntax; the entry rules are New's (PackDotenv
// applies both).
func FromDotenv(data []byte) ([]Entry, []int, error) {
	if bytes.HasPrefix(data, []byte("\xef\xbb\xbf")) {
		return nil, nil, invalid(RuleDotenv, "line 1", "starts with a byte order mark; save the file as UTF-8 without BOM")
	}
	if !utf8.Valid(data) {
		return nil, nil, invalid(RuleUTF8, lineAt(data, firstInvalidUTF8(data)), "not valid UTF-8")
	}
	if i := bytes.IndexByte(data, 0); i >= 0 {
		return nil, nil, invalid(RuleNUL, lineAt(data, i), "a NUL byte, which no environment variable can carry")
	}
	var entries []Entry
	var lines []int
	text := strings.TrimSuffix(string(data), "\n")
	if text == "" {
		return nil, nil, nil
	}
	for i, line := range strings.Split(text, "\n") {
		n := i + 1
		e, ok, err := dotenvLine(line)
		if err != nil {
			return nil, nil, invalid(RuleDotenv, fmt.Sprintf("line %d", n), "%s", err.Error())
		}
		if ok {
			entries = append(entries, e)
			lines = append(lines, n)
		}
	}
	return entries, lines, nil
}

// PackDotenv is FromDotenv followed by New, with entry errors naming the
// line and the entry's 0-based position among the assignments
// ("line 7 (entry 3)").
func PackDotenv(data []byte) (*Bundle, error) {
	entries, lines, err := FromDotenv(data)
	if err != nil {
		return nil, err
	}
	return build(entries, func(i int) string { return fmt.Sprintf("line %d (entry %d)", lines[i], i) })
}

// lineAt is "line N" for the byte offset off.
func lineAt(data []byte, off int) string {
	return fmt.Sprintf("line %d", bytes.Count(data[:off], []byte("\n"))+1)
}

// syntaxError is a dotenv message; dotenvLine's messages never hold text
// from the line.
type syntaxError string

func (e syntaxError) Error() string { return string(e) }

func isBlank(c byte) bool { return c == ' ' || c == '\t' }

func isNameByte(c byte) bool {
	return c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
}

// dotenvLine reads one line; ok is false for blank and comment lines.
func dotenvLine(line string) (e Entry, ok bool, err error) {
	if strings.IndexByte(line, '\r') >= 0 {
		return e, false, syntaxError(`a carriage return; save the file with LF line endings (write \r inside double quotes to put one in a value)`)
	}
	s := strings.TrimLeft(line, " \t")
	if s == "" || s[0] == '#' {
		return e, false, nil
	}
	if rest, found := strings.CutPrefix(s, "export"); found && rest != "" && isBlank(rest[0]) {
		s = strings.TrimLeft(rest, " \t")
	}
	end := 0
	for end < len(s) && isNameByte(s[end]) {
		end++
	}
	switch {
	case end == len(s):
		return e, false, syntaxError("no '=' after the name; write NAME=value")
	case end > 0 && isBlank(s[end]):
		return e, false, syntaxError("white space before '='; write NAME=value")
	case s[end] != '=':
		return e, false, syntaxError("the name holds a character other than A-Z, a-z, 0-9 and _, or the line is not an assignment")
	}
	if end == 0 {
		return e, false, syntaxError("no name before '='")
	}
	e.Name = s[:end]
	rest := s[end+1:]
	var tail string
	switch {
	case rest == "":
	case isBlank(rest[0]):
		tail = rest // NAME= followed only by an optional comment
	case rest[0] == '#':
		return e, false, syntaxError("an unquoted value starting with '#'; quote the value")
	case rest[0] == '\'':
		close := strings.IndexByte(rest[1:], '\'')
		if close < 0 {
			return e, false, syntaxError("an unterminated single quote (values are one line; use double quotes and \\n for a newline)")
		}
		e.Value, tail = rest[1:1+close], rest[2+close:]
		if err := checkControl(e.Value); err != nil {
			return e, false, err
		}
	case rest[0] == '"':
		e.Value, tail, err = doubleQuoted(rest[1:])
		if err != nil {
			return e, false, err
		}
	default:
		stop := strings.IndexAny(rest, " \t")
		if stop < 0 {
			stop = len(rest)
		}
		e.Value, tail = rest[:stop], rest[stop:]
		if strings.ContainsAny(e.Value, "'\"\\$`#") {
			return e, false, syntaxError("an unquoted value holding one of ' \" \\ $ ` #; quote the value (single quotes take it literally)")
		}
		if err := checkControl(e.Value); err != nil {
			return e, false, err
		}
	}
	if t := strings.TrimLeft(tail, " \t"); t != "" && (t[0] != '#' || len(t) == len(tail)) {
		return e, false, syntaxError("text after the value; quote the whole value, or start a comment with white space and '#'")
	}
	return e, true, nil
}

// doubleQuoted reads a double-quoted value after its opening quote.
func doubleQuoted(s string) (value, tail string, err error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			return b.String(), s[i+1:], nil
		case '$', '`':
			return "", "", syntaxError("an unescaped $ or ` in double quotes, which a shell would expand; write \\$ or \\` (or use single quotes)")
		case '\\':
			if i+1 == len(s) {
				return "", "", syntaxError("a backslash at the end of the line; values are one line (use \\n for a newline)")
			}
			i++
			switch s[i] {
			case '\\', '"', '$', '`':
				b.WriteByte(s[i])
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			default:
				return "", "", syntaxError("an unsupported escape in double quotes; the escapes are \\\\ \\\" \\n \\r \\t \\$ \\`")
			}
		default:
			if err := checkControl(s[i : i+1]); err != nil {
				return "", "", err
			}
			b.WriteByte(c)
		}
	}
	return "", "", syntaxError("an unterminated double quote (values are one line; use \\n for a newline)")
}

// checkControl rejects raw control characters other than tab in a value
// as written in the file (escapes in double quotes are fine).
func checkControl(raw string) error {
	for i := 0; i < len(raw); i++ {
		if raw[i] < 0x20 && raw[i] != '\t' {
			return syntaxError("a raw control character in the value; write it as an escape in double quotes, or pack from JSON")
		}
	}
	return nil
}
