package jwkset

import (
	"bytes"
	"encoding/json"
	"slices"
)

// object decodes raw as a JSON object (not null). Members outside allowed
// are refused (allowed nil: any), members of required must be present.
func object(field string, raw []byte, allowed, required []string) (map[string]json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil, invalidf("%s: %s is not a JSON object", field, clip(raw))
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, invalidf("%s: %v", field, err)
	}
	if allowed != nil {
		for name := range m {
			if !slices.Contains(allowed, name) {
				return nil, invalidf("%s: unknown member %q; a keyset has exactly %v", field, name, allowed)
			}
		}
	}
	for _, name := range required {
		if _, ok := m[name]; !ok {
			return nil, invalidf("%s: member %q is missing", field, name)
		}
	}
	return m, nil
}

// array decodes raw as a JSON array (not null).
func array(field string, raw []byte) ([]json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '[' {
		return nil, invalidf("%s: %s is not a JSON array", field, clip(raw))
	}
	var a []json.RawMessage
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, invalidf("%s: %v", field, err)
	}
	return a, nil
}

// str decodes raw as a JSON string (not null).
func str(field string, raw []byte) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '"' {
		return "", invalidf("%s: %s is not a JSON string", field, clip(raw))
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", invalidf("%s: %v", field, err)
	}
	return s, nil
}

// clip shortens a JSON fragment for an error message.
func clip(raw []byte) string {
	const max = 40
	if len(raw) == 0 {
		return "nothing"
	}
	if len(raw) > max {
		return string(raw[:max]) + "…"
	}
	return string(raw)
}
