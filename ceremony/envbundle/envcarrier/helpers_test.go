package envcarrier

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// raw encodes entries in the given order without any rule check: the
// canonical text of a carrier that may break the entry rules.
func raw(t testing.TB, entries ...Entry) []byte {
	t.Helper()
	b, err := encode(entries)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// seq is n entries named V000, V001, … (sorted) with value v.
func seq(n int, v string) []Entry {
	out := make([]Entry, n)
	for i := range out {
		out[i] = Entry{Name: fmt.Sprintf("V%03d", i), Value: v}
	}
	return out
}

// payload is five entries A…E whose names and values total exactly total
// bytes (at least 5), with plain ASCII values so the carrier stays small.
func payload(total int) []Entry {
	names := []string{"A", "B", "C", "D", "E"}
	left := total - len(names)
	out := make([]Entry, len(names))
	for i, n := range names {
		v := min(left, MaxValueBytes)
		left -= v
		out[i] = Entry{Name: n, Value: strings.Repeat("x", v)}
	}
	return out
}

// carrierOf is two entries A and B whose canonical carrier is exactly
// size bytes, using values of U+0001 (6 bytes each in the carrier, the
// \u0001 escape) padded with 'a': by the size formula of docs/env-bundle.md
// the escaped values then take size - 55 - 23*2 - 2 bytes.
func carrierOf(size int) []Entry {
	esc := size - carrierOverhead(2) - 2
	a := min(esc, 6*16000)
	return []Entry{{Name: "A", Value: escaped(a)}, {Name: "B", Value: escaped(esc - a)}}
}

// escaped is a value whose escaped form is exactly n bytes.
func escaped(n int) string {
	return strings.Repeat("\x01", n/6) + strings.Repeat("a", n%6)
}

// carrierOverhead is the fixed part of the size formula for n entries.
func carrierOverhead(n int) int { return 55 + 23*n }

// wantRule checks err is a fail.Invalid *Error of rule at where ("" for
// any), and that its text holds nothing secret from the test inputs.
func wantRule(t *testing.T, err error, rule Rule, where string) {
	t.Helper()
	if rule == "" {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v, want rule %s", err, rule)
	}
	if e.Rule != rule || where != "" && e.Where != where {
		t.Fatalf("error %v: rule %s at %q, want %s at %q", err, e.Rule, e.Where, rule, where)
	}
	if !fail.Is(err, fail.Invalid) {
		t.Fatalf("error %v: class %v, want invalid", err, fail.ClassOf(err))
	}
	if strings.Contains(strings.ToLower(err.Error()), "secret") {
		t.Fatalf("error quotes the input: %v", err)
	}
}
