package views

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// MaxFieldsDepth bounds the nesting of a managedFields fieldsV1 set.
const MaxFieldsDepth = 64

// OwnedFields parses a managedFields entry's fieldsV1 (a set of field
// paths as nested JSON objects: "f:<field>", "k:<key object>", "v:<value>",
// "i:<index>", and "." for the node itself) and returns its leaves as
// sorted paths: ".spec.replicas", ".spec.template.spec.containers[name=app].image",
// ".spec.finalizers[=x]", ".items[3]". A leaf is a node with no member other
// than ".". Anything else is invalid input.
func OwnedFields(raw []byte) ([]string, error) {
	var root map[string]json.RawMessage
	if err := decodeObject(raw, &root); err != nil {
		return nil, fail.Errorf(fail.Invalid, "fieldsV1: %v", err)
	}
	var out []string
	if err := walkFields("", root, 0, &out); err != nil {
		return nil, fail.Errorf(fail.Invalid, "fieldsV1: %v", err)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

func decodeObject(raw []byte, v *map[string]json.RawMessage) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if *v == nil {
		return fmt.Errorf("not an object")
	}
	if dec.More() {
		return fmt.Errorf("trailing data")
	}
	return nil
}

func walkFields(prefix string, node map[string]json.RawMessage, depth int, out *[]string) error {
	if depth > MaxFieldsDepth {
		return fmt.Errorf("%s: nested deeper than %d", prefix, MaxFieldsDepth)
	}
	children := 0
	for key, raw := range node {
		if key == "." {
			continue
		}
		children++
		seg, err := segment(key)
		if err != nil {
			return fmt.Errorf("%s: %v", prefix, err)
		}
		var child map[string]json.RawMessage
		if err := decodeObject(raw, &child); err != nil {
			return fmt.Errorf("%s%s: %v", prefix, seg, err)
		}
		if err := walkFields(prefix+seg, child, depth+1, out); err != nil {
			return err
		}
	}
	if children == 0 && prefix != "" {
		*out = append(*out, prefix)
	}
	return nil
}

// segment renders one fieldsV1 key as a path segment.
func segment(key string) (string, error) {
	kind, rest, ok := strings.Cut(key, ":")
	if !ok {
		return "", fmt.Errorf("key %q has no f:, k:, v: or i: prefix", key)
	}
	switch kind {
	case "f":
		return "." + rest, nil
	case "i":
		return "[" + rest + "]", nil
	case "v":
		return "[=" + rest + "]", nil
	case "k":
		var m map[string]any
		if err := json.Unmarshal([]byte(rest), &m); err != nil || m == nil {
			return "", fmt.Errorf("key %q: k: must be followed by a JSON object", key)
		}
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(m)) {
			parts = append(parts, fmt.Sprintf("%s=%v", k, m[k]))
		}
		return "[" + strings.Join(parts, ",") + "]", nil
	}
	return "", fmt.Errorf("key %q has no f:, k:, v: or i: prefix", key)
}
