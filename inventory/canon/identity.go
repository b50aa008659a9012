package canon

import (
	"cmp"
	"fmt"
	"slices"

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
// of order or repeated.
func CheckSortedUnique(ids []Identity) error {
	for i := 1; i < len(ids); i++ {
		switch c := Compare(ids[i-1], ids[i]); {
		case c == 0:
			return fmt.Errorf("duplicate identity %s", ids[i])
		case c > 0:
			return fmt.Errorf("identity %s is out of order after %s", ids[i], ids[i-1])
		}
	}
	return nil
}

// InventoryDigest is the digest of a sorted inventory: the canonical JSON
// array of identities under the "inventory" domain.
func InventoryDigest(ids []Identity) (string, error) {
	if ids == nil {
		ids = []Identity{}
	}
	return DigestOf(DomainInventory, ids)
}

// Missing returns the identities of a that are absent from b. Both must be
// sorted.
func Missing(a, b []Identity) []Identity {
	var out []Identity
	i, j := 0, 0
	for i < len(a) {
		if j >= len(b) {
			out = append(out, a[i:]...)
			break
		}
		switch c := Compare(a[i], b[j]); {
		case c == 0:
			i++
			j++
		case c < 0:
			out = append(out, a[i])
			i++
		default:
			j++
		}
	}
	return out
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
	n := &yamlv3.Node{Kind: yamlv3.MappingNode, Style: yamlv3.FlowStyle}
	for _, s := range kv {
		var c yamlv3.Node
		if err := c.Encode(s); err != nil {
			return nil, err
		}
		n.Content = append(n.Content, &c)
	}
	return n, nil
}
