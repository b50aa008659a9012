package fleetfile

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/strictjson"
)

// maxReported bounds the problems one error lists.
const maxReported = 20

// problem is one broken rule, at a field path ("" for the whole file).
type problem struct{ path, detail string }

// checker collects the problems of one fleet file, so that an error
// reports every broken rule of a stage at once.
type checker struct{ problems []problem }

func (c *checker) add(path, detail string) { c.problems = append(c.problems, problem{path, detail}) }

func (c *checker) addf(path, format string, args ...any) { c.add(path, fmt.Sprintf(format, args...)) }

// err is nil without problems, else one fail.Invalid error naming each
// problem's field: "PATH: DETAIL", or "N problems:" and one per line.
func (c *checker) err() error {
	line := func(p problem) string {
		if p.path == "" {
			return p.detail
		}
		return p.path + ": " + p.detail
	}
	switch n := len(c.problems); n {
	case 0:
		return nil
	case 1:
		return fail.Errorf(fail.Invalid, "%s", line(c.problems[0]))
	default:
		var b strings.Builder
		fmt.Fprintf(&b, "%d problems:", n)
		for i, p := range c.problems {
			if i == maxReported {
				fmt.Fprintf(&b, "\n  … and %d more", n-maxReported)
				break
			}
			b.WriteString("\n  " + line(p))
		}
		return fail.Errorf(fail.Invalid, "%s", b.String())
	}
}

// join is the path of member key of the value at path. A key of a label
// map is written ["key"], since label keys hold dots and slashes.
func join(path, key string) string {
	switch {
	case path == "":
		return key
	case strings.HasSuffix(path, ".labels") || strings.HasSuffix(path, ".matchLabels"):
		return path + "[" + strconv.Quote(clip(key)) + "]"
	}
	return path + "." + key
}

// clip shortens a value quoted in an error.
func clip(s string) string { return strictjson.Clip(s) }

// quote is s clipped and quoted for an error.
func quote(s string) string { return strconv.Quote(clip(s)) }

// kindOf names a JSON value's type for an error.
func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	}
	return fmt.Sprintf("%T", v)
}

// mapping is v as a mapping whose keys are among fields, every one of
// required present; a null member is a problem and left out. ok is false
// when v is no mapping.
func (c *checker) mapping(path string, v any, fields, required []string) (map[string]any, bool) {
	m, isMap := v.(map[string]any)
	if !isMap {
		c.addf(path, "want a mapping, got %s", kindOf(v))
		return nil, false
	}
	out := map[string]any{}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		switch {
		case !slices.Contains(fields, k):
			c.addf(join(path, k), "unknown field; the fields are %s", strings.Join(fields, ", "))
		case m[k] == nil:
			c.add(join(path, k), "is null; give a value or leave the field out")
		default:
			out[k] = m[k]
		}
	}
	for _, k := range required {
		if _, ok := m[k]; !ok {
			c.add(join(path, k), "is missing")
		}
	}
	return out, true
}

// str is v as a string.
func (c *checker) str(path string, v any) (string, bool) {
	s, ok := v.(string)
	if !ok {
		c.addf(path, "want a string, got %s%s", kindOf(v), quoteHint(v))
	}
	return s, ok
}

// quoteHint says how to write a scalar YAML did not read as a string.
func quoteHint(v any) string {
	switch v.(type) {
	case bool:
		return " (quote it: YAML reads y, n, yes, no, on, off, true and false unquoted as booleans)"
	case json.Number:
		return " (quote it if it is meant as a string)"
	}
	return ""
}

// list is v as a list.
func (c *checker) list(path string, v any) ([]any, bool) {
	l, ok := v.([]any)
	if !ok {
		c.addf(path, "want a list, got %s", kindOf(v))
	}
	return l, ok
}

// integer is v as an integer from lo to hi.
func (c *checker) integer(path string, v any, lo, hi int) (int, bool) {
	num, ok := v.(json.Number)
	if !ok {
		c.addf(path, "want an integer, got %s", kindOf(v))
		return 0, false
	}
	n, err := strconv.Atoi(num.String())
	if err != nil || !plainInteger.MatchString(num.String()) || n < lo || n > hi {
		c.addf(path, "%s is not an integer from %d to %d", clip(num.String()), lo, hi)
		return 0, false
	}
	return n, true
}

// labels is v as a map of label keys to label values (Kubernetes label
// syntax), at least one pair when nonEmpty.
func (c *checker) labels(path string, v any, nonEmpty bool) (map[string]string, bool) {
	m, isMap := v.(map[string]any)
	if !isMap {
		c.addf(path, "want a mapping of label keys to values, got %s", kindOf(v))
		return nil, false
	}
	if nonEmpty && len(m) == 0 {
		c.add(path, "is empty; give at least one label")
		return nil, false
	}
	before := len(c.problems)
	out := map[string]string{}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		val, p := m[k], join(path, k)
		if err := checkLabelKey(k); err != "" {
			c.add(p, err)
		}
		s, ok := val.(string)
		if !ok {
			c.addf(p, "want a string, got %s%s", kindOf(val), quoteHint(val))
			continue
		}
		if err := checkLabelValue(s); err != "" {
			c.add(p, err)
		}
		out[k] = s
	}
	return out, len(c.problems) == before
}
