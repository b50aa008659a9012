// Package strictjson decodes the strict JSON objects of the pure formats
// (the activation intent, the worker delivery): exactly one object, UTF-8,
// whose member names are exactly the ones expected — no unknown, missing or
// duplicate member (encoding/json silently keeps the last duplicate), and
// nothing after it. Errors name members, never values beyond a clipped
// member name. A leaf: the standard library only.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"unicode/utf8"
)

// Object decodes data as one JSON object whose member names are exactly
// want. Values come back raw, white space trimmed, numbers untouched.
func Object(data []byte, want []string) (map[string]json.RawMessage, error) {
	if !utf8.Valid(data) {
		return nil, errors.New("not UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("not a JSON object")
	}
	m := map[string]json.RawMessage{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("malformed JSON: %v", err)
		}
		name, _ := t.(string)
		if _, dup := m[name]; dup {
			return nil, fmt.Errorf("member %q appears twice", Clip(name))
		}
		if !slices.Contains(want, name) {
			return nil, fmt.Errorf("unknown member %q; the members are %q", Clip(name), want)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("%s: malformed JSON: %v", name, err)
		}
		m[name] = bytes.TrimSpace(raw)
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return nil, errors.New("malformed JSON object")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("data after the JSON object")
	}
	for _, name := range want {
		if _, ok := m[name]; !ok {
			return nil, fmt.Errorf("member %q is missing", name)
		}
	}
	return m, nil
}

// String is a JSON string member (not null, not a number).
func String(raw json.RawMessage) (string, bool) {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// Reader reads the members of one format's objects, its errors made in
// the format's own words: Invalid makes every error (the format's class
// and prefix), NotString ends the message of a member that is not a
// string ("is not a JSON string"). The texts are pinned by the formats'
// test vectors, so each format keeps its own.
type Reader struct {
	Invalid   func(format string, args ...any) error
	NotString string
}

// Object is Object, its error made by r.Invalid and prefixed with what.
func (r Reader) Object(what string, data []byte, want []string) (map[string]json.RawMessage, error) {
	m, err := Object(data, want)
	if err != nil {
		return nil, r.Invalid("%s: %v", what, err)
	}
	return m, nil
}

// String is the JSON string member name (not null, not a number); else an
// error naming it and quoting its value, clipped (Clip).
func (r Reader) String(name string, raw json.RawMessage) (string, error) {
	v, ok := String(raw)
	if !ok {
		return "", r.Invalid("%s: %s %s", name, Clip(string(raw)), r.NotString)
	}
	return v, nil
}

// Clip shortens a value quoted in an error to 80 bytes.
func Clip[T ~string | ~[]byte](v T) string {
	s := string(v)
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// Check walks data's token stream: exactly one JSON value, no member name
// twice in one object at any depth (encoding/json silently keeps the last
// of duplicates), nesting no deeper than maxDepth. what names the file's
// kind in errors ("keyset": "a keyset file is one object").
func Check(data []byte, maxDepth int, what string) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var stack []*frame
	values := 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("not JSON: %v", err)
		}
		if len(stack) == 0 {
			values++
			if values > 1 {
				return fmt.Errorf("more than one JSON value; a %s file is one object", what)
			}
		}
		if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].wantKey {
			top := stack[n-1]
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:n-1]
				valueDone(stack)
				continue
			}
			name := tok.(string)
			if top.seen[name] {
				return fmt.Errorf("member %q appears twice in one object", name)
			}
			top.seen[name] = true
			top.wantKey = false
			continue
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if len(stack) == maxDepth {
				return fmt.Errorf("nested deeper than the %s shape allows", what)
			}
			obj := tok == json.Delim('{')
			stack = append(stack, &frame{object: obj, wantKey: obj, seen: map[string]bool{}})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			valueDone(stack)
		default:
			valueDone(stack)
		}
	}
	if values == 0 {
		return fmt.Errorf("empty; a %s file is one JSON object", what)
	}
	if len(stack) > 0 {
		return errors.New("not JSON: unexpected end of input")
	}
	return nil
}

// frame is one open object or array of Check's walk.
type frame struct {
	object  bool
	wantKey bool // the next token of an object is a member name
	seen    map[string]bool
}

// valueDone marks that the innermost object's current member has its value.
func valueDone(stack []*frame) {
	if n := len(stack); n > 0 && stack[n-1].object {
		stack[n-1].wantKey = true
	}
}
