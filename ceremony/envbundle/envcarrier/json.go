package envcarrier

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// The strict JSON reader behind Parse and FromJSONObject. encoding/json
// keeps the last of duplicate member names, replaces bad surrogates with
// U+FFFD and quotes input characters in its errors; this reader rejects
// the first two and its errors hold only offsets and indices.

// kind is a JSON value's type.
type kind uint8

const (
	kindString kind = iota + 1
	kindNumber
	kindBool
	kindNull
	kindObject
	kindArray
)

// node is one parsed JSON value; str is set for strings, members for
// objects (document order), elems for arrays.
type node struct {
	kind    kind
	off     int
	str     string
	members []member
	elems   []*node
}

type member struct {
	key string
	off int
	val *node
}

// maxDepth bounds nesting; the carrier needs three levels.
const maxDepth = 16

type scanner struct {
	data  []byte
	pos   int
	depth int
}

// parseJSON reads exactly one JSON value (RFC 8259) from data, which the
// caller has checked is valid UTF-8. It rejects duplicate member names
// (compared after unescaping), strings holding U+0000, unpaired UTF-16
// surrogate escapes, nesting deeper than maxDepth, and trailing text.
func parseJSON(data []byte) (*node, error) {
	s := &scanner{data: data}
	s.space()
	if s.pos == len(data) {
		return nil, invalid(RuleJSON, "", "empty input; want one JSON object")
	}
	n, err := s.value()
	if err != nil {
		return nil, err
	}
	s.space()
	if s.pos != len(data) {
		return nil, invalid(RuleJSON, at(s.pos), "text after the JSON value")
	}
	return n, nil
}

func (s *scanner) space() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

func (s *scanner) fail(msg string) error { return invalid(RuleJSON, at(s.pos), "%s", msg) }

func (s *scanner) value() (*node, error) {
	if s.pos == len(s.data) {
		return nil, s.fail("unexpected end of input")
	}
	switch c := s.data[s.pos]; {
	case c == '{':
		return s.object()
	case c == '[':
		return s.array()
	case c == '"':
		off := s.pos
		str, err := s.string()
		return &node{kind: kindString, off: off, str: str}, err
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	case c == 't':
		return s.literal("true", kindBool)
	case c == 'f':
		return s.literal("false", kindBool)
	case c == 'n':
		return s.literal("null", kindNull)
	}
	return nil, s.fail("not the start of a JSON value")
}

func (s *scanner) enter() error {
	s.depth++
	if s.depth > maxDepth {
		return s.fail("nested deeper than 16 levels")
	}
	return nil
}

func (s *scanner) object() (*node, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	n := &node{kind: kindObject, off: s.pos}
	s.pos++ // {
	s.space()
	if s.pos < len(s.data) && s.data[s.pos] == '}' {
		s.pos++
		s.depth--
		return n, nil
	}
	seen := map[string]int{}
	for {
		s.space()
		if s.pos == len(s.data) || s.data[s.pos] != '"' {
			return nil, s.fail("expected a member name in double quotes")
		}
		off := s.pos
		key, err := s.string()
		if err != nil {
			return nil, err
		}
		if j, dup := seen[key]; dup {
			return nil, invalid(RuleDuplicateKey, at(off), "member[%d] has the same name as member[%d] of the same object; JSON member names must be unique", len(n.members), j)
		}
		seen[key] = len(n.members)
		s.space()
		if s.pos == len(s.data) || s.data[s.pos] != ':' {
			return nil, s.fail("expected ':' after a member name")
		}
		s.pos++
		s.space()
		v, err := s.value()
		if err != nil {
			return nil, err
		}
		n.members = append(n.members, member{key: key, off: off, val: v})
		s.space()
		if s.pos == len(s.data) {
			return nil, s.fail("unexpected end of input in an object")
		}
		switch s.data[s.pos] {
		case ',':
			s.pos++
		case '}':
			s.pos++
			s.depth--
			return n, nil
		default:
			return nil, s.fail("expected ',' or '}' in an object")
		}
	}
}

func (s *scanner) array() (*node, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	n := &node{kind: kindArray, off: s.pos}
	s.pos++ // [
	s.space()
	if s.pos < len(s.data) && s.data[s.pos] == ']' {
		s.pos++
		s.depth--
		return n, nil
	}
	for {
		s.space()
		v, err := s.value()
		if err != nil {
			return nil, err
		}
		n.elems = append(n.elems, v)
		s.space()
		if s.pos == len(s.data) {
			return nil, s.fail("unexpected end of input in an array")
		}
		switch s.data[s.pos] {
		case ',':
			s.pos++
		case ']':
			s.pos++
			s.depth--
			return n, nil
		default:
			return nil, s.fail("expected ',' or ']' in an array")
		}
	}
}

func (s *scanner) literal(word string, k kind) (*node, error) {
	if !strings.HasPrefix(string(s.data[s.pos:min(len(s.data), s.pos+len(word))]), word) {
		return nil, s.fail("not the start of a JSON value")
	}
	n := &node{kind: k, off: s.pos}
	s.pos += len(word)
	return n, nil
}

// number accepts RFC 8259's grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number() (*node, error) {
	n := &node{kind: kindNumber, off: s.pos}
	digits := func() int {
		start := s.pos
		for s.pos < len(s.data) && s.data[s.pos] >= '0' && s.data[s.pos] <= '9' {
			s.pos++
		}
		return s.pos - start
	}
	if s.data[s.pos] == '-' {
		s.pos++
	}
	if s.pos < len(s.data) && s.data[s.pos] == '0' {
		s.pos++
	} else if digits() == 0 {
		return nil, s.fail("malformed number")
	}
	if s.pos < len(s.data) && s.data[s.pos] == '.' {
		s.pos++
		if digits() == 0 {
			return nil, s.fail("malformed number")
		}
	}
	if s.pos < len(s.data) && (s.data[s.pos] == 'e' || s.data[s.pos] == 'E') {
		s.pos++
		if s.pos < len(s.data) && (s.data[s.pos] == '+' || s.data[s.pos] == '-') {
			s.pos++
		}
		if digits() == 0 {
			return nil, s.fail("malformed number")
		}
	}
	return n, nil
}

// string reads a JSON string at s.pos (its opening quote) and returns it
// unescaped.
func (s *scanner) string() (string, error) {
	s.pos++ // "
	var b strings.Builder
	for {
		if s.pos == len(s.data) {
			return "", s.fail("unterminated string")
		}
		c := s.data[s.pos]
		switch {
		case c == '"':
			s.pos++
			return b.String(), nil
		case c < 0x20:
			return "", s.fail("a control character inside a string; JSON requires it escaped")
		case c != '\\':
			b.WriteByte(c)
			s.pos++
			continue
		}
		if s.pos+1 == len(s.data) {
			return "", s.fail("unterminated string")
		}
		esc := s.data[s.pos+1]
		switch esc {
		case '"', '\\', '/':
			b.WriteByte(esc)
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			r, ok := s.hex4(s.pos + 2)
			if !ok {
				return "", s.fail("a \\u escape without four hex digits")
			}
			width := 6
			if utf16.IsSurrogate(r) {
				lo, ok := s.hex4(s.pos + 8)
				if r >= 0xdc00 || !ok || s.data[s.pos+6] != '\\' || s.data[s.pos+7] != 'u' || lo < 0xdc00 || lo > 0xdfff {
					return "", s.fail("an unpaired UTF-16 surrogate escape")
				}
				r = utf16.DecodeRune(r, lo)
				width = 12
			}
			if r == 0 {
				return "", invalid(RuleNUL, at(s.pos), "a string holds U+0000 (NUL), which no environment variable can carry")
			}
			b.WriteRune(r)
			s.pos += width
			continue
		default:
			return "", s.fail("an unknown escape sequence in a string")
		}
		s.pos += 2
	}
}

// hex4 reads four hex digits at i.
func (s *scanner) hex4(i int) (rune, bool) {
	if i+4 > len(s.data) {
		return 0, false
	}
	var r rune
	for _, c := range s.data[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// checkText applies the byte rules every JSON input shares: valid UTF-8
// and no NUL byte.
func checkText(data []byte) error {
	if !utf8.Valid(data) {
		return invalid(RuleUTF8, at(firstInvalidUTF8(data)), "not valid UTF-8")
	}
	for i, c := range data {
		if c == 0 {
			return invalid(RuleNUL, at(i), "a NUL byte")
		}
	}
	return nil
}

// firstInvalidUTF8 is the offset of data's first byte that does not start
// a valid UTF-8 sequence.
func firstInvalidUTF8(data []byte) int {
	for i := 0; i < len(data); {
		r, n := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(data)
}
