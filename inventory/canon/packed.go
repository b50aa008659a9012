package canon

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// InventoryGroup is one run of a packed inventory (docs/head.md §2.1): the
// identities of one apiVersion, kind and namespace, consecutive in
// inventory order, with their names front-coded.
type InventoryGroup struct {
	APIVersion string       `json:"apiVersion"`
	Kind       string       `json:"kind"`
	Namespace  string       `json:"namespace"`
	Names      []FrontCoded `json:"names"`
}

// FrontCoded is one name of a group: the number of leading characters
// (Unicode code points) it shares with the group's previous name, and the
// rest. Its JSON form is the two-element array [shared, "suffix"].
type FrontCoded struct {
	Shared int
	Suffix string
}

// MarshalJSON writes [shared,"suffix"].
func (f FrontCoded) MarshalJSON() ([]byte, error) {
	return json.Marshal([]any{f.Shared, f.Suffix})
}

// UnmarshalJSON reads exactly [integer, string].
func (f *FrontCoded) UnmarshalJSON(b []byte) error {
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("a name must be [shared, \"suffix\"]: %w", err)
	}
	if len(raw) != 2 {
		return fmt.Errorf("a name must be [shared, \"suffix\"], got %d elements", len(raw))
	}
	if err := json.Unmarshal(raw[0], &f.Shared); err != nil {
		return fmt.Errorf("a name's shared length: %w", err)
	}
	if !bytes.HasPrefix(bytes.TrimSpace(raw[1]), []byte(`"`)) {
		return fmt.Errorf("a name's suffix must be a string")
	}
	return json.Unmarshal(raw[1], &f.Suffix)
}

// PackInventory packs a sorted inventory: maximal runs of one apiVersion,
// kind and namespace, each name coded against the run's previous name with
// the longest common prefix. The packing of an inventory is unique.
func PackInventory(ids []Identity) []InventoryGroup {
	groups := []InventoryGroup{}
	prev := ""
	for _, id := range ids {
		n := len(groups)
		if n == 0 || groups[n-1].APIVersion != id.APIVersion || groups[n-1].Kind != id.Kind || groups[n-1].Namespace != id.Namespace {
			groups = append(groups, InventoryGroup{APIVersion: id.APIVersion, Kind: id.Kind, Namespace: id.Namespace})
			n, prev = n+1, ""
		}
		chars, at := commonPrefix(prev, id.Name)
		groups[n-1].Names = append(groups[n-1].Names, FrontCoded{Shared: chars, Suffix: id.Name[at:]})
		prev = id.Name
	}
	return groups
}

// UnpackInventory decodes a packed inventory and checks that it is the
// unique packing of what it decodes to: every group has names, follows a
// group of another apiVersion, kind or namespace, its first name shares
// nothing, and every other name shares exactly the longest common prefix
// with the one before it and adds a non-empty suffix. Order and
// uniqueness of the identities are the caller's check (CheckSortedUnique).
func UnpackInventory(groups []InventoryGroup) ([]Identity, error) {
	var ids []Identity
	for g, grp := range groups {
		if len(grp.Names) == 0 {
			return nil, fmt.Errorf("group %d (%s/%s in %q) has no names", g, grp.APIVersion, grp.Kind, grp.Namespace)
		}
		if g > 0 && groups[g-1].APIVersion == grp.APIVersion && groups[g-1].Kind == grp.Kind && groups[g-1].Namespace == grp.Namespace {
			return nil, fmt.Errorf("group %d repeats the apiVersion, kind and namespace of group %d: one run is one group", g, g-1)
		}
		prev := ""
		for i, fc := range grp.Names {
			if fc.Shared < 0 || fc.Shared > utf8.RuneCountInString(prev) {
				return nil, fmt.Errorf("group %d name %d: shared %d is outside 0..%d, the previous name's length", g, i, fc.Shared, utf8.RuneCountInString(prev))
			}
			name := prev[:byteOffset(prev, fc.Shared)] + fc.Suffix
			if fc.Suffix == "" {
				return nil, fmt.Errorf("group %d name %d: the suffix is empty", g, i)
			}
			if chars, _ := commonPrefix(prev, name); chars != fc.Shared {
				return nil, fmt.Errorf("group %d name %d (%q): shared is %d, but the longest common prefix with %q is %d characters", g, i, name, fc.Shared, prev, chars)
			}
			ids = append(ids, Identity{APIVersion: grp.APIVersion, Kind: grp.Kind, Namespace: grp.Namespace, Name: name})
			prev = name
		}
	}
	return ids, nil
}

// commonPrefix is the longest common prefix of a and b in characters
// (code points), and its length in bytes.
func commonPrefix(a, b string) (chars, bytes int) {
	for bytes < len(a) && bytes < len(b) {
		ra, na := utf8.DecodeRuneInString(a[bytes:])
		rb, nb := utf8.DecodeRuneInString(b[bytes:])
		if ra != rb || na != nb || a[bytes:bytes+na] != b[bytes:bytes+nb] {
			break
		}
		chars, bytes = chars+1, bytes+na
	}
	return chars, bytes
}

// byteOffset is the byte offset of the first n characters of s (n at most
// its length in characters).
func byteOffset(s string, n int) int {
	at := 0
	for ; n > 0; n-- {
		_, size := utf8.DecodeRuneInString(s[at:])
		at += size
	}
	return at
}
