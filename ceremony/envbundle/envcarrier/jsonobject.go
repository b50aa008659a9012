package envcarrier

import "fmt"

// FromJSONObject reads pack's JSON input: one JSON object whose members
// are the entries, {"NAME": "value", …}, every value a string, no member
// name twice (compared after unescaping). The same byte and syntax rules
// as Parse apply, but not canonical form or order. It returns the entries
// in document order.
func FromJSONObject(data []byte) ([]Entry, error) {
	if err := checkText(data); err != nil {
		return nil, err
	}
	root, err := parseJSON(data)
	if err != nil {
		return nil, err
	}
	if root.kind != kindObject {
		return nil, invalid(RuleShape, "", "not a JSON object; write {\"NAME\": \"value\", …}")
	}
	entries := make([]Entry, len(root.members))
	for i, m := range root.members {
		if m.val.kind != kindString {
			return nil, invalid(RuleShape, fmt.Sprintf("member[%d]", i), "the value is not a string; every value must be a JSON string")
		}
		entries[i] = Entry{Name: m.key, Value: m.val.str}
	}
	return entries, nil
}

// PackJSON is FromJSONObject followed by New, with entry errors naming
// the member by its 0-based position in the document ("member[2]").
func PackJSON(data []byte) (*Bundle, error) {
	entries, err := FromJSONObject(data)
	if err != nil {
		return nil, err
	}
	return build(entries, func(i int) string { return fmt.Sprintf("member[%d]", i) })
}
