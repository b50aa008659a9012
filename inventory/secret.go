package inventory

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"regexp"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// RedactedMarker replaces a Secret value, or a source file that may hold
// one, when no secret digest key is given: the value is then not bound by
// any digest, and the lock says so with render.secretValuesCovered: false.
const RedactedMarker = "<redacted>"

// secretValue is one value of a Secret's data or stringData.
type secretValue struct {
	id    Identity
	field string // "data" or "stringData"
	key   string
	value []byte // decoded
}

func isSecret(id Identity) bool { return id.APIVersion == "v1" && id.Kind == "Secret" }

// secretValuesOf lists the values of a Secret's data (base64-decoded) and
// stringData, by field then key. Errors never include a value.
func secretValuesOf(id Identity, u *unstructured.Unstructured) ([]secretValue, error) {
	if !isSecret(id) {
		return nil, nil
	}
	var out []secretValue
	for _, field := range []string{"data", "stringData"} {
		raw := u.Object[field]
		if raw == nil {
			continue
		}
		m, ok := raw.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("secret %q: %s must be a map", id.String(), field)
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			s, ok := m[k].(string)
			if !ok {
				return nil, fmt.Errorf("secret %q: %s[%q] must be a string", id.String(), field, k)
			}
			v := []byte(s)
			if field == "data" {
				var err error
				if v, err = base64.StdEncoding.DecodeString(s); err != nil {
					return nil, fmt.Errorf("secret %q: %s[%q] is not valid base64", id.String(), field, k)
				}
			}
			out = append(out, secretValue{id: id, field: field, key: k, value: v})
		}
	}
	return out, nil
}

// SecretValueDigest is what the render digest holds in place of one Secret
// value under key (docs/digests.md):
//
//	"hmac-sha256:" + hex(HMAC-SHA256(key, "kubectl-ql3/secret-value/v1" 0x00 namespace 0x00 name 0x00 field 0x00 dataKey 0x00 value))
//
// field is "data" or "stringData"; value is the decoded bytes.
func SecretValueDigest(key []byte, namespace, name, field, dataKey string, value []byte) string {
	return keyed(key, DomainSecretValue, []byte(namespace), []byte(name), []byte(field), []byte(dataKey), value)
}

// redact returns deep copies of objs with every Secret value replaced by
// its keyed digest, or by RedactedMarker without a key, and whether the
// values are bound.
func redact(objs []*unstructured.Unstructured, secrets []secretValue, key []byte) ([]*unstructured.Unstructured, bool, error) {
	// Only the objects holding a Secret value are copied; every other
	// object is shared with objs, so a render holds its objects once.
	holders := map[Identity]bool{}
	for _, s := range secrets {
		holders[s.id] = true
	}
	out := make([]*unstructured.Unstructured, len(objs))
	byID := map[Identity]*unstructured.Unstructured{}
	for i, o := range objs {
		out[i] = o
		if id := (Identity{APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName()}); holders[id] {
			out[i] = o.DeepCopy()
			byID[id] = out[i]
		}
	}
	for _, s := range secrets {
		token := RedactedMarker
		if len(key) > 0 {
			token = SecretValueDigest(key, s.id.Namespace, s.id.Name, s.field, s.key, s.value)
		}
		if err := unstructured.SetNestedField(byID[s.id].Object, token, s.field, s.key); err != nil {
			return nil, false, fmt.Errorf("secret %q: %w", s.id.String(), err)
		}
	}
	return out, len(secrets) == 0 || len(key) > 0, nil
}

// secretKindRE finds a Secret kind in YAML or JSON text.
var secretKindRE = regexp.MustCompile(`kind["']?\s*:\s*["']?Secret\b`)

// mayHoldSecret reports whether a source file may carry a Secret value: it
// names the Secret kind (a manifest or a patch of one), or contains one of
// the values verbatim or base64-encoded (generator literals, env and data
// files). It errs towards yes.
func mayHoldSecret(data []byte, secrets []secretValue) bool {
	if secretKindRE.Match(data) {
		return true
	}
	for _, s := range secrets {
		if len(s.value) == 0 {
			continue
		}
		if bytes.Contains(data, s.value) || bytes.Contains(data, []byte(base64.StdEncoding.EncodeToString(s.value))) {
			return true
		}
	}
	return false
}
