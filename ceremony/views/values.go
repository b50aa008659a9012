package views

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory"
)

// Values compares an object as the release would set it, after (the
// answer of the server-side apply dry-run diff makes, with the lock's
// field manager and force), with the live object. Both are normalised and
// Secret-masked as diff compares them (Normalize, Mask), so no Secret
// value is compared or named except as "(value)" and "(value changed)".
// It lists, as OwnedFields writes paths:
//
//   - removed: the fields after holds and live lacks (another client
//     removed them; server-side apply leaves no trace of a removal);
//   - changed: the fields both hold with other values, and the fields
//     live holds that after lacks (the release's apply would remove them).
//
// Who wrote a value is not asked: a value written under the deployer's
// own field manager name is drift like any other. Every field is compared
// but .apiVersion, .kind, .status and what Normalize removes. Elements of
// a list are matched by the keys the managedFields of either object give
// them (a container by name, a port by containerPort and protocol); a list
// of scalars the managedFields hold as a set ("v:" members) is compared as
// a set; any other list is atomic, compared whole. Both lists are sorted.
func Values(id inventory.Identity, after, live *unstructured.Unstructured) (removed, changed []string, err error) {
	keys := map[string]any{}
	for _, mf := range slices.Concat(after.GetManagedFields(), live.GetManagedFields()) {
		if mf.FieldsV1 == nil {
			continue
		}
		var tree map[string]any
		if err := json.Unmarshal(mf.FieldsV1.Raw, &tree); err != nil {
			return nil, nil, fail.Errorf(fail.Invalid, "%s: managedFields of %q: %v", id, mf.Manager, err)
		}
		mergeTree(keys, tree)
	}
	l, a := Mask(id, Normalize(live.Object), Normalize(after.Object))
	w := &valuesWalk{}
	w.walk("", a, l, keys)
	slices.Sort(w.removed)
	slices.Sort(w.changed)
	return slices.Compact(w.removed), slices.Compact(w.changed), nil
}

type valuesWalk struct {
	removed, changed []string
}

func (w *valuesWalk) walk(path string, a, l any, node map[string]any) {
	switch av := a.(type) {
	case map[string]any:
		lm, ok := l.(map[string]any)
		if !ok {
			w.changed = append(w.changed, path)
			return
		}
		for _, k := range slices.Sorted(maps.Keys(union(av, lm))) {
			p := path + "." + k
			if p == ".apiVersion" || p == ".kind" || p == ".status" {
				continue
			}
			ae, inA := av[k]
			le, inL := lm[k]
			switch {
			case !inL:
				w.removed = append(w.removed, p)
			case !inA:
				w.changed = append(w.changed, p)
			default:
				w.walk(p, ae, le, child(node, "f:"+k))
			}
		}
	case []any:
		ll, ok := l.([]any)
		switch {
		case !ok:
			w.changed = append(w.changed, path)
		case !w.keyed(path, av, ll, node) && !w.set(path, av, ll, node) && !equalJSON(av, ll):
			w.changed = append(w.changed, path) // atomic
		}
	default:
		if !equalJSON(a, l) {
			w.changed = append(w.changed, path)
		}
	}
}

// keyed compares the lists a and l element by element, matched by the
// keys of node's "k:" members; false when an element has no such key
// (then the list is compared otherwise).
func (w *valuesWalk) keyed(path string, a, l []any, node map[string]any) bool {
	ak, ok := elementKeys(a, node)
	if !ok {
		return false
	}
	lk, ok := elementKeys(l, node)
	if !ok {
		return false
	}
	for i, key := range ak {
		p := path + "[" + keyString(key) + "]"
		j := slices.IndexFunc(lk, func(k map[string]any) bool { return matches(k, key) && matches(key, k) })
		if j < 0 {
			w.removed = append(w.removed, p)
			continue
		}
		w.walk(p, a[i], l[j], keyNode(node, key))
	}
	for _, key := range lk {
		if !slices.ContainsFunc(ak, func(k map[string]any) bool { return matches(k, key) && matches(key, k) }) {
			w.changed = append(w.changed, path+"["+keyString(key)+"]")
		}
	}
	return true
}

// set compares lists of scalars that node holds as a set ("v:" members);
// false for any other list.
func (w *valuesWalk) set(path string, a, l []any, node map[string]any) bool {
	if !hasPrefix(node, "v:") {
		return false
	}
	for _, e := range slices.Concat(a, l) {
		switch e.(type) {
		case map[string]any, []any:
			return false
		}
	}
	in := func(list []any, e any) bool {
		return slices.ContainsFunc(list, func(x any) bool { return equalJSON(x, e) })
	}
	for _, e := range a {
		if !in(l, e) {
			w.removed = append(w.removed, fmt.Sprintf("%s[=%s]", path, rawJSON(e)))
		}
	}
	for _, e := range l {
		if !in(a, e) {
			w.changed = append(w.changed, fmt.Sprintf("%s[=%s]", path, rawJSON(e)))
		}
	}
	return true
}

// elementKeys are the keys of list's elements (elementKey); false when
// the list is empty of keyed elements or one element has no key.
func elementKeys(list []any, node map[string]any) ([]map[string]any, bool) {
	out := make([]map[string]any, 0, len(list))
	for _, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			return nil, false
		}
		key, ok := elementKey(node, m)
		if !ok {
			return nil, false
		}
		out = append(out, key)
	}
	return out, true
}

func union(a, b map[string]any) map[string]any {
	out := make(map[string]any, len(a)+len(b))
	maps.Copy(out, a)
	maps.Copy(out, b)
	return out
}

func equalJSON(a, b any) bool { return reflect.DeepEqual(normalJSON(a), normalJSON(b)) }

func rawJSON(v any) string {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(raw)
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
