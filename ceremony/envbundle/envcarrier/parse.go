package envcarrier

import (
	"fmt"
	"strings"
)

// Parse reads a carrier: the verify direction, and the only way bytes
// become a Bundle. It is pure (no file, network, clock or cluster access)
// and applies the rules of docs/env-bundle.md in the order given there:
// carrier size, UTF-8, NUL bytes, JSON syntax (with duplicate member
// names and NUL escapes), shape and schema, entry count, each entry's
// rules in order, order and uniqueness of names, the name+value total,
// and finally byte equality with the canonical form. Errors are
// fail.Invalid *Error values that never quote the input.
func Parse(data []byte) (*Bundle, error) {
	if len(data) > MaxCarrierBytes {
		return nil, invalid(RuleCarrierSize, "", "%d bytes, more than %d (96 KiB)", len(data), MaxCarrierBytes)
	}
	if err := checkText(data); err != nil {
		return nil, err
	}
	root, err := parseJSON(data)
	if err != nil {
		return nil, err
	}
	if root.kind != kindObject {
		return nil, invalid(RuleShape, "", "the carrier is not a JSON object")
	}
	var schema, list *node
	for _, m := range root.members {
		switch m.key {
		case "schema":
			schema = m.val
		case "entries":
			list = m.val
		default:
			return nil, invalid(RuleShape, at(m.off), "an unknown top-level member; the carrier has exactly \"entries\" and \"schema\"")
		}
	}
	switch {
	case schema == nil:
		return nil, invalid(RuleShape, "", "no \"schema\" member")
	case schema.kind != kindString || schema.str != Schema:
		return nil, invalid(RuleSchema, "schema", "not %q", Schema)
	case list == nil:
		return nil, invalid(RuleShape, "", "no \"entries\" member")
	case list.kind != kindArray:
		return nil, invalid(RuleShape, "entries", "not an array")
	}
	if err := checkCount(len(list.elems)); err != nil {
		return nil, err
	}
	entries := make([]Entry, len(list.elems))
	payload := 0
	for i, el := range list.elems {
		where := func() string { return fmt.Sprintf("entries[%d]", i) }
		if entries[i], err = entryOf(el, where); err != nil {
			return nil, err
		}
		if err := checkEntry(entries[i], where); err != nil {
			return nil, err
		}
		if i > 0 {
			switch c := strings.Compare(entries[i-1].Name, entries[i].Name); {
			case c == 0:
				return nil, invalid(RuleDuplicateName, where(), "the same name as entries[%d]; each name may appear once", i-1)
			case c > 0:
				return nil, invalid(RuleOrder, where(), "the name sorts before the name of entries[%d]; entries are sorted by name, bytewise ascending", i-1)
			}
		}
		payload += len(entries[i].Name) + len(entries[i].Value)
	}
	if err := checkPayload(payload); err != nil {
		return nil, err
	}
	carrier, err := encode(entries)
	if err != nil {
		return nil, err
	}
	if string(carrier) != string(data) {
		return nil, invalid(RuleCanonical, at(firstDifference(carrier, data)), "not the RFC 8785 canonical form (no white space, members sorted, minimal escapes); pack the bundle again with kubectl ql3 env-bundle pack")
	}
	return &Bundle{entries: entries, carrier: carrier, payload: payload}, nil
}

// entryOf reads one element of "entries": an object of exactly the string
// members name and value.
func entryOf(el *node, where func() string) (Entry, error) {
	if el.kind != kindObject {
		return Entry{}, invalid(RuleShape, where(), "not an object")
	}
	var e Entry
	var name, value bool
	for _, m := range el.members {
		var dst *string
		switch m.key {
		case "name":
			dst, name = &e.Name, true
		case "value":
			dst, value = &e.Value, true
		default:
			return Entry{}, invalid(RuleShape, where(), "an unknown member; an entry has exactly \"name\" and \"value\"")
		}
		if m.val.kind != kindString {
			return Entry{}, invalid(RuleShape, where(), "%q is not a string", m.key)
		}
		*dst = m.val.str
	}
	switch {
	case !name:
		return Entry{}, invalid(RuleShape, where(), "no \"name\" member")
	case !value:
		return Entry{}, invalid(RuleShape, where(), "no \"value\" member")
	}
	return e, nil
}

// firstDifference is the first offset where a and b differ.
func firstDifference(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
