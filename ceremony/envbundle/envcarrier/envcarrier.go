// Package envcarrier is the environment bundle carrier
// qinglong/environment-bundle@v1 (docs/env-bundle.md): a bounded, canonical
// JSON list of {name,value} entries that a task receives as one opaque
// Secret. It is a pure format leaf: no file, network, clock or cluster
// access, and it imports no client-go, CAS kernel, ceremony or plugin code.
//
// Values and names are secret. No error, report or String method of this
// package ever contains a name or a value, or any other text taken from the
// input: errors name an entry index, a line or a byte offset, and a rule.
package envcarrier

import (
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// The carrier's schema and bounds. KiB is 1024 bytes; sizes are UTF-8 byte
// lengths of the decoded strings (names and values) or of the carrier text.
const (
	// Schema is the value of the carrier's "schema" member.
	Schema = "qinglong/environment-bundle@v1"
	// MaxEntries is the most entries a bundle holds (at least 1).
	MaxEntries = 256
	// MaxValueBytes bounds each value: 16 KiB.
	MaxValueBytes = 16 * 1024
	// MaxNameValueBytes bounds the sum of the byte lengths of all names
	// and all values: 64 KiB.
	MaxNameValueBytes = 64 * 1024
	// MaxCarrierBytes bounds the carrier text: 96 KiB.
	MaxCarrierBytes = 96 * 1024
	// ReservedPrefix starts the platform's own variables; no bundle name
	// may start with it (case-sensitive).
	ReservedPrefix = "QL3_"
)

// nameRE is the common shell subset of environment variable names.
var nameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Entry is one environment variable of a bundle.
type Entry struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// String never shows the name or the value.
func (Entry) String() string { return "envcarrier.Entry{redacted}" }

// Format prints String under every verb (%v, %+v, %#v, %s, %q, %x, %d,
// …), so no fmt call shows the name or the value.
func (e Entry) Format(f fmt.State, _ rune) { io.WriteString(f, e.String()) }

// Bundle is a valid carrier: its entries, sorted by name, and its
// canonical bytes. A Bundle is immutable; the zero value is not valid.
type Bundle struct {
	entries []Entry
	carrier []byte
	payload int // sum of the byte lengths of names and values
}

// String never shows a name or a value.
func (b Bundle) String() string {
	return fmt.Sprintf("environment bundle (%d entries, %d bytes)", len(b.entries), len(b.carrier))
}

// Format prints String under every verb, for a Bundle and a *Bundle alike,
// so no fmt call shows a name or a value.
func (b Bundle) Format(f fmt.State, _ rune) { io.WriteString(f, b.String()) }

// Len is the number of entries.
func (b *Bundle) Len() int { return len(b.entries) }

// Size is the length of the carrier in bytes.
func (b *Bundle) Size() int { return len(b.carrier) }

// NameValueBytes is the sum of the UTF-8 byte lengths of all names and all
// values: the quantity bounded by MaxNameValueBytes.
func (b *Bundle) NameValueBytes() int { return b.payload }

// Bytes is a copy of the carrier: the RFC 8785 canonical JSON text that
// Parse accepts and publishing stores.
func (b *Bundle) Bytes() []byte { return slices.Clone(b.carrier) }

// Entries is a copy of the entries, sorted by name.
func (b *Bundle) Entries() []Entry { return slices.Clone(b.entries) }

// Names is the sorted list of names.
func (b *Bundle) Names() []string {
	out := make([]string, len(b.entries))
	for i, e := range b.entries {
		out[i] = e.Name
	}
	return out
}

// New makes the bundle of entries, given in any order: the pack direction.
// It applies every rule of docs/env-bundle.md in the order given there and
// sorts the entries by name. Errors are fail.Invalid *Error values naming
// the entry as entries[i], i its position in the argument.
func New(entries []Entry) (*Bundle, error) {
	return build(entries, func(i int) string { return fmt.Sprintf("entries[%d]", i) })
}

// build checks entries (labelled by position through where), sorts them
// and encodes the carrier. Rule order: count, each entry's rules in input
// order, duplicate names, the name+value total, the carrier size.
func build(entries []Entry, where func(int) string) (*Bundle, error) {
	if err := checkCount(len(entries)); err != nil {
		return nil, err
	}
	payload := 0
	for i, e := range entries {
		if err := checkEntry(e, func() string { return where(i) }); err != nil {
			return nil, err
		}
		payload += len(e.Name) + len(e.Value)
	}
	order := make([]int, len(entries))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return strings.Compare(entries[a].Name, entries[b].Name) })
	sorted := make([]Entry, len(entries))
	for k, i := range order {
		sorted[k] = entries[i]
		if k > 0 && entries[order[k-1]].Name == entries[i].Name {
			return nil, invalid(RuleDuplicateName, where(i), "the same name as %s; each name may appear once", where(order[k-1]))
		}
	}
	if err := checkPayload(payload); err != nil {
		return nil, err
	}
	carrier, err := encode(sorted)
	if err != nil {
		return nil, err
	}
	if len(carrier) > MaxCarrierBytes {
		return nil, invalid(RuleCarrierSize, "", "the carrier would be %d bytes, more than %d (96 KiB); each \", \\ or control character in a value takes 2 or 6 bytes in the carrier: remove entries or shorten values", len(carrier), MaxCarrierBytes)
	}
	return &Bundle{entries: sorted, carrier: carrier, payload: payload}, nil
}

func checkCount(n int) error {
	switch {
	case n == 0:
		return invalid(RuleEntryCount, "", "no entries; a bundle holds 1 to %d", MaxEntries)
	case n > MaxEntries:
		return invalid(RuleEntryCount, "", "%d entries, more than %d; split the environment", n, MaxEntries)
	}
	return nil
}

// checkEntry applies the rules of one entry: name syntax, reserved prefix,
// valid UTF-8 and no NUL in the value, value size.
func checkEntry(e Entry, where func() string) error {
	switch {
	case !nameRE.MatchString(e.Name):
		return invalid(RuleName, where(), "the name is not a shell variable name: it must match ^[A-Za-z_][A-Za-z0-9_]*$")
	case strings.HasPrefix(e.Name, ReservedPrefix):
		return invalid(RuleReservedPrefix, where(), "the name starts with %s, which is reserved for the platform's own variables; rename it", ReservedPrefix)
	case !utf8.ValidString(e.Value):
		return invalid(RuleUTF8, where(), "the value is not valid UTF-8")
	case strings.IndexByte(e.Value, 0) >= 0:
		return invalid(RuleNUL, where(), "the value holds a NUL character, which no environment variable can carry")
	case len(e.Value) > MaxValueBytes:
		return invalid(RuleValueSize, where(), "the value is %d bytes, more than %d (16 KiB)", len(e.Value), MaxValueBytes)
	}
	return nil
}

func checkPayload(n int) error {
	if n > MaxNameValueBytes {
		return invalid(RuleNameValueSize, "", "names and values total %d bytes, more than %d (64 KiB); remove entries or shorten values", n, MaxNameValueBytes)
	}
	return nil
}

// carrierDoc is the carrier's JSON shape; jcs orders its members.
type carrierDoc struct {
	Entries []Entry `json:"entries"`
	Schema  string  `json:"schema"`
}

// encode is the RFC 8785 canonical carrier of sorted, checked entries.
func encode(sorted []Entry) ([]byte, error) {
	raw, err := json.Marshal(carrierDoc{Entries: sorted, Schema: Schema})
	if err != nil {
		return nil, fmt.Errorf("environment bundle: encode: %w", err)
	}
	out, err := jcs.Transform(raw)
	if err != nil {
		// Checked entries are valid UTF-8 without NUL; jcs cannot fail on
		// them. Its message may quote input, so it is not passed on.
		return nil, fmt.Errorf("environment bundle: canonical JSON failed")
	}
	return out, nil
}
