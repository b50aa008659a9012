package canon

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	yamlv3 "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Identity names one object: apiVersion/kind/namespace/name. Cluster-scoped
// objects have an empty namespace.
type Identity struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
}

func (id Identity) String() string {
	ns := id.Namespace
	if ns == "" {
		ns = "-"
	}
	return fmt.Sprintf("%s/%s/%s/%s", id.APIVersion, id.Kind, ns, id.Name)
}

// Compare orders identities by the 4-tuple, bytewise.
func Compare(a, b Identity) int {
	return cmp.Or(
		cmp.Compare(a.APIVersion, b.APIVersion),
		cmp.Compare(a.Kind, b.Kind),
		cmp.Compare(a.Namespace, b.Namespace),
		cmp.Compare(a.Name, b.Name),
	)
}

// SortIdentities sorts ids in place by the 4-tuple.
func SortIdentities(ids []Identity) { slices.SortFunc(ids, Compare) }

// CheckSortedUnique returns an error naming the first identity that is out
// of order or repeated. Two identities with the same Key (one object under
// two apiVersions) are repeated too.
func CheckSortedUnique(ids []Identity) error {
	for i := 1; i < len(ids); i++ {
		switch c := Compare(ids[i-1], ids[i]); {
		case c == 0:
			return fmt.Errorf("duplicate identity %s", ids[i])
		case c > 0:
			return fmt.Errorf("identity %s is out of order after %s", ids[i], ids[i-1])
		}
	}
	seen := make(map[Key]Identity, len(ids))
	for _, id := range ids {
		if prev, ok := seen[id.Key()]; ok {
			return fmt.Errorf("identities %s and %s are the same object (%s) under two apiVersions", prev, id, id.Key())
		}
		seen[id.Key()] = id
	}
	return nil
}

// InventoryDigest is the digest of a sorted inventory: the canonical JSON
// array of identities under the "inventory" domain.
func InventoryDigest(ids []Identity) (string, error) {
	a := NewArrayDigest(DomainInventory)
	if err := a.AddIdentities(ids); err != nil {
		return "", err
	}
	return a.Sum(), nil
}

// AppendCanonical appends id's canonical JSON to b, byte for byte
// Canonical(id) — the members in the order of their names' UTF-16 code
// units (apiVersion, kind, name, namespace), each string as RFC 8785
// §3.2.2.2 writes it — without the reflection and the re-parse: the
// inventories of the Head and the receipts are hashed whole at every read
// and write (FuzzAppendCanonical holds it to Canonical). It reports false,
// b unchanged, when a string is not valid UTF-8: Canonical's form of that
// is the JSON encoder's, which replaces the bytes.
func (id Identity) AppendCanonical(b []byte) ([]byte, bool) {
	if !utf8.ValidString(id.APIVersion) || !utf8.ValidString(id.Kind) || !utf8.ValidString(id.Name) || !utf8.ValidString(id.Namespace) {
		return b, false
	}
	b = append(b, `{"apiVersion":`...)
	b = appendString(b, id.APIVersion)
	b = append(b, `,"kind":`...)
	b = appendString(b, id.Kind)
	b = append(b, `,"name":`...)
	b = appendString(b, id.Name)
	b = append(b, `,"namespace":`...)
	b = appendString(b, id.Namespace)
	return append(b, '}'), true
}

// appendString appends s, valid UTF-8, as RFC 8785 serialises a string:
// quotation mark and reverse solidus escaped, U+0008, U+0009, U+000A,
// U+000C and U+000D as \b \t \n \f \r, the other code points below U+0020
// as \u00xx with lowercase hex digits, every other code point as it is.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c >= 0x20:
			b = append(b, c)
		case c == '\b':
			b = append(b, '\\', 'b')
		case c == '\t':
			b = append(b, '\\', 't')
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '\f':
			b = append(b, '\\', 'f')
		case c == '\r':
			b = append(b, '\\', 'r')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
	}
	return append(b, '"')
}

// CanonicalIdentities is Canonical(ids), each identity written by
// AppendCanonical (Canonical for one it cannot write): a receipt's
// inventory member, without the whole array's parse tree.
func CanonicalIdentities(ids []Identity) ([]byte, error) {
	if ids == nil {
		return Canonical(ids)
	}
	b := append(make([]byte, 0, 2+len(ids)*96), '[')
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		var ok bool
		if b, ok = id.AppendCanonical(b); !ok {
			c, err := Canonical(id)
			if err != nil {
				return nil, fmt.Errorf("identity %s: %w", id, err)
			}
			b = append(b, c...)
		}
	}
	return append(b, ']'), nil
}

// AddIdentities adds each of ids in order (AppendCanonical, Canonical for
// an identity it cannot write).
func (a *ArrayDigest) AddIdentities(ids []Identity) error {
	var buf []byte
	for _, id := range ids {
		c, ok := id.AppendCanonical(buf[:0])
		if !ok {
			var err error
			if c, err = Canonical(id); err != nil {
				return fmt.Errorf("identity %s: %w", id, err)
			}
		}
		a.AddCanonical(c)
		buf = c
	}
	return nil
}

// Missing returns the identities of a whose object is absent from b, in a's
// order: objects are compared by Key (group, kind, namespace, name), so an
// object b lists under another apiVersion is not missing.
func Missing(a, b []Identity) []Identity {
	in := make(map[Key]bool, len(b))
	for _, id := range b {
		in[id.Key()] = true
	}
	var out []Identity
	for _, id := range a {
		if !in[id.Key()] {
			out = append(out, id)
		}
	}
	return out
}

// SameObjects reports whether a and b name the same set of objects by Key,
// whatever apiVersion each lists them under.
func SameObjects(a, b []Identity) bool {
	return len(Missing(a, b)) == 0 && len(Missing(b, a)) == 0
}

// Key is an object's identity across API versions: group, kind, namespace
// and name, as cli-utils' ObjMetadata names an object. Two identities with
// the same Key are one object on the API server, whichever version it is
// read or written in.
type Key struct {
	Group     string `json:"group"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

func (k Key) String() string {
	ns := k.Namespace
	if ns == "" {
		ns = "-"
	}
	g := k.Group
	if g == "" {
		g = "core"
	}
	return fmt.Sprintf("%s/%s/%s/%s", g, k.Kind, ns, k.Name)
}

// Key is the identity's group, kind, namespace and name. The group is the
// part of apiVersion before the first "/", or "" (the core group) when
// apiVersion has no "/".
func (id Identity) Key() Key {
	group, _, found := strings.Cut(id.APIVersion, "/")
	if !found {
		group = ""
	}
	return Key{Group: group, Kind: id.Kind, Namespace: id.Namespace, Name: id.Name}
}

// GroupKind is the identity's API group and kind.
func (id Identity) GroupKind() schema.GroupKind {
	return schema.FromAPIVersionAndKind(id.APIVersion, id.Kind).GroupKind()
}

// MarshalYAML writes an identity as one flow mapping (as in the lock).
func (id Identity) MarshalYAML() (any, error) {
	return FlowMapping("apiVersion", id.APIVersion, "kind", id.Kind, "namespace", id.Namespace, "name", id.Name)
}

// FlowMapping is a YAML flow mapping of the key-value string pairs kv.
func FlowMapping(kv ...string) (*yamlv3.Node, error) {
	n := &yamlv3.Node{Kind: yamlv3.MappingNode, Style: yamlv3.FlowStyle, Content: make([]*yamlv3.Node, 0, len(kv))}
	for _, s := range kv {
		c, err := scalar(s)
		if err != nil {
			return nil, err
		}
		n.Content = append(n.Content, c)
	}
	return n, nil
}

// scalar is the node Node.Encode makes of s. Node.Encode writes s as YAML
// and parses it back, about 30 KB allocated a call: 1.3 GB, and 1.7 s, for
// a 10,000-object lock. A string that can only be written plain (plain) is
// made directly, as the plain !!str scalar Node.Encode returns for it
// (FuzzScalar holds the two equal); any other goes through Node.Encode.
func scalar(s string) (*yamlv3.Node, error) {
	if plain(s) {
		return &yamlv3.Node{Kind: yamlv3.ScalarNode, Tag: "!!str", Value: s}, nil
	}
	var c yamlv3.Node
	if err := c.Encode(s); err != nil {
		return nil, err
	}
	return &c, nil
}

// plain reports whether s is an ASCII letter followed by letters, digits,
// '.', '_', '/' or '-', and none of the words YAML reads as a boolean or
// null in either version 1.1 or 1.2 (y, yes, n, no, on, off, true, false,
// null, in any case): a string the encoder writes plain, in a flow mapping
// too, and every YAML parser reads back as that string.
func plain(s string) bool {
	if s == "" || !isLetter(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !isLetter(c) && !('0' <= c && c <= '9') && c != '.' && c != '_' && c != '/' && c != '-' {
			return false
		}
	}
	switch strings.ToLower(s) {
	case "y", "yes", "n", "no", "on", "off", "true", "false", "null":
		return false
	}
	return true
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// List names ids for a message: comma-separated, the first max of them
// and "and N more" for the rest.
func List(ids []Identity, max int) string {
	var parts []string
	for i, id := range ids {
		if i == max {
			parts = append(parts, fmt.Sprintf("and %d more", len(ids)-max))
			break
		}
		parts = append(parts, id.String())
	}
	return strings.Join(parts, ", ")
}
