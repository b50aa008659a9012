package vectors

import (
	"encoding/json"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/qinglong/kubectl-ql3/inventory"
)

// TestLockVectors runs testdata/vectors/lock against inventory.ParseLock
// (docs/lock.md): the parsing rules and every field's rule, and for an
// accepted lock its lock, source and inventory digests (docs/digests.md).
func TestLockVectors(t *testing.T) {
	each(t, "lock", map[string]procedure{"lock": func(t *testing.T, v vector, input []byte) {
		l, err := inventory.ParseLock(input)
		verdict(t, v, err)
		if err != nil {
			return
		}
		ld, err := l.Digest()
		if err != nil {
			t.Fatal(err)
		}
		sd, err := inventory.SourceDigest(l.Source.Files)
		if err != nil {
			t.Fatal(err)
		}
		id, err := inventory.InventoryDigest(l.Render.Inventory)
		if err != nil {
			t.Fatal(err)
		}
		digests(t, v, lockDigests(t, input, l), map[string]string{"lockDigest": ld, "sourceDigest": sd, "inventoryDigest": id})
	}})
}

// lockDigests recomputes from the file: the lock digest over RFC 8785 of
// the lock as JSON (YAML read by sigs.k8s.io/yaml), and the source and
// inventory digests over the lock's own lists, which must be the ones it
// states.
func lockDigests(t *testing.T, data []byte, l *inventory.Lock) map[string]string {
	t.Helper()
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	doc := jsonValue(t, js).(map[string]any)
	files, _ := json.Marshal(doc["source"].(map[string]any)["files"])
	inv, _ := json.Marshal(doc["render"].(map[string]any)["inventory"])
	out := map[string]string{
		"lockDigest":      domainDigest("lock", "v1", canonical(t, js)),
		"sourceDigest":    domainDigest("source", "v1", canonical(t, files)),
		"inventoryDigest": domainDigest("inventory", "v1", canonical(t, inv)),
	}
	if out["sourceDigest"] != l.Source.Digest || out["inventoryDigest"] != l.Render.InventoryDigest {
		t.Errorf("an accepted lock states source %s and inventory %s; its lists digest to %s and %s",
			l.Source.Digest, l.Render.InventoryDigest, out["sourceDigest"], out["inventoryDigest"])
	}
	return out
}
