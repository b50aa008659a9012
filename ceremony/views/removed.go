package views

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory"
)

// Removed lists the fields that applied (the object as the release sets
// it) holds and live lacks: fields another client removed. Server-side
// apply gives no sign of such a removal (the deployer's managed set just
// shrinks), so it is found by comparing the two. Fields compared are all
// but .apiVersion, .kind, .status, .metadata other than labels and
// annotations, and a v1 Secret's write-only .stringData. A value is not
// compared: a field the deployer still owns has its value, and one whose
// value someone changed is another manager's (Drift). A field set to its
// zero value (null, "", 0, false, [] or {}) and absent live is not removed
// (the API server omits such values). List elements are matched by the
// keys of the deployer's managedFields (a container by name, a port by
// containerPort and protocol); a list with no keyed or set elements there
// is atomic and only compared as present. The paths are sorted and
// written as OwnedFields writes them.
func Removed(id inventory.Identity, applied, live map[string]any, mfs []metav1.ManagedFieldsEntry, fm string) ([]string, error) {
	owned := map[string]any{}
	for _, mf := range mfs {
		if mf.Manager != fm || mf.FieldsV1 == nil {
			continue
		}
		var tree map[string]any
		if err := json.Unmarshal(mf.FieldsV1.Raw, &tree); err != nil {
			return nil, fail.Errorf(fail.Invalid, "%s: managedFields of %q: %v", id, fm, err)
		}
		mergeTree(owned, tree)
	}
	w := removedWalk{secret: id.APIVersion == "v1" && id.Kind == "Secret"}
	w.walk("", applied, live, owned)
	slices.Sort(w.out)
	return slices.Compact(w.out), nil
}

type removedWalk struct {
	secret bool
	out    []string
}

func (w *removedWalk) walk(path string, a, l any, node map[string]any) {
	switch av := a.(type) {
	case map[string]any:
		lm, _ := l.(map[string]any)
		for _, k := range slices.Sorted(maps.Keys(av)) {
			p := path + "." + k
			if w.skip(p) {
				continue
			}
			lv, ok := lm[k]
			if !ok {
				if !isZero(av[k]) {
					w.out = append(w.out, p)
				}
				continue
			}
			w.walk(p, av[k], lv, child(node, "f:"+k))
		}
	case []any:
		ll, _ := l.([]any)
		w.list(path, av, ll, node)
	}
}

// list matches the elements of an applied list with the live ones by the
// keys the deployer's managedFields give them.
func (w *removedWalk) list(path string, a, l []any, node map[string]any) {
	for _, e := range a {
		switch ev := e.(type) {
		case map[string]any:
			key, keyed := elementKey(node, ev)
			if !keyed {
				continue // atomic, or no key known: present is all that is compared
			}
			match := -1
			for i, le := range l {
				if lm, ok := le.(map[string]any); ok && matches(lm, key) {
					match = i
					break
				}
			}
			p := path + "[" + keyString(key) + "]"
			if match < 0 {
				w.out = append(w.out, p)
				continue
			}
			w.walk(p, ev, l[match], keyNode(node, key))
		default:
			raw, err := json.Marshal(e)
			if err != nil || child(node, "v:"+string(raw)) == nil && !hasPrefix(node, "v:") {
				continue // atomic list of scalars
			}
			if !slices.ContainsFunc(l, func(le any) bool { return reflect.DeepEqual(normalJSON(le), normalJSON(e)) }) {
				w.out = append(w.out, fmt.Sprintf("%s[=%s]", path, raw))
			}
		}
	}
}

// skip is the path filter of Removed.
func (w *removedWalk) skip(p string) bool {
	switch {
	case p == ".apiVersion" || p == ".kind" || p == ".status":
		return true
	case p == ".metadata.labels" || p == ".metadata.annotations":
		return false
	case strings.HasPrefix(p, ".metadata.") && strings.Count(p, ".") == 2:
		return true
	case w.secret && p == ".stringData":
		return true
	}
	return false
}

// elementKey is the key of list element e: the fields named by the first
// "k:" member of node, with e's values (a key field e lacks is left out:
// the API server defaults it, as a port's protocol).
func elementKey(node map[string]any, e map[string]any) (map[string]any, bool) {
	for _, k := range slices.Sorted(maps.Keys(node)) {
		obj, ok := keyObject(k)
		if !ok {
			continue
		}
		key := map[string]any{}
		for f := range obj {
			if v, ok := e[f]; ok {
				key[f] = v
			}
		}
		return key, len(key) > 0
	}
	return nil, false
}

// keyNode is the member of node whose "k:" key object agrees with key.
func keyNode(node, key map[string]any) map[string]any {
	for k, v := range node {
		if obj, ok := keyObject(k); ok && matches(obj, key) {
			m, _ := v.(map[string]any)
			return m
		}
	}
	return nil
}

func keyObject(k string) (map[string]any, bool) {
	rest, ok := strings.CutPrefix(k, "k:")
	if !ok {
		return nil, false
	}
	var obj map[string]any
	if json.Unmarshal([]byte(rest), &obj) != nil || obj == nil {
		return nil, false
	}
	return obj, true
}

// matches reports whether m has every field of key with an equal value.
func matches(m, key map[string]any) bool {
	for f, v := range key {
		mv, ok := m[f]
		if !ok || !reflect.DeepEqual(normalJSON(mv), normalJSON(v)) {
			return false
		}
	}
	return true
}

// normalJSON makes numbers comparable across decoders (int64 from YAML,
// float64 from JSON).
func normalJSON(v any) any {
	raw, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	_ = json.Unmarshal(raw, &out)
	return out
}

func keyString(key map[string]any) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(key)) {
		parts = append(parts, fmt.Sprintf("%s=%v", k, key[k]))
	}
	return strings.Join(parts, ",")
}

func child(node map[string]any, k string) map[string]any {
	m, _ := node[k].(map[string]any)
	return m
}

func hasPrefix(node map[string]any, prefix string) bool {
	for k := range node {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

// mergeTree adds the fieldsV1 tree src into dst.
func mergeTree(dst, src map[string]any) {
	for k, v := range src {
		sm, ok := v.(map[string]any)
		if !ok {
			continue
		}
		dm, ok := dst[k].(map[string]any)
		if !ok {
			dm = map[string]any{}
			dst[k] = dm
		}
		mergeTree(dm, sm)
	}
}

func isZero(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(x) == 0
	case []any:
		return len(x) == 0
	}
	return reflect.ValueOf(v).IsZero()
}
