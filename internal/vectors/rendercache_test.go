package vectors

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"

	"github.com/qinglong/kubectl-ql3/inventory/rendercache"
)

// TestRenderCacheVectors runs testdata/vectors/render-cache against
// inventory/rendercache (docs/render-cache.md): build identities, and
// cache directories read under the key a lookup computes — a hit, or a
// miss for the reason the doc gives (a miss has no exit class: the
// command renders afresh).
func TestRenderCacheVectors(t *testing.T) {
	each(t, "render-cache", map[string]procedure{
		"build-id": func(t *testing.T, v vector, input []byte) {
			var b rendercache.Build
			if err := json.Unmarshal(input, &b); err != nil {
				t.Fatal(err)
			}
			id, err := rendercache.BuildDigest(b)
			if err != nil {
				t.Fatal(err)
			}
			if ok, _ := b.Identified(); ok != (v.Outcome == "identified") {
				t.Errorf("identified %v, want %q", ok, v.Outcome)
			}
			digests(t, v, map[string]string{"buildID": domainDigest("render-cache-build", "v1", canonical(t, input))}, map[string]string{"buildID": id})
		},
		"cache-get": cacheGet,
	})
}

// cacheGet looks the vector's key up in its cache directory: a hit with
// the key and mac recomputed, or a miss for the vector's reason.
func cacheGet(t *testing.T, v vector, _ []byte) {
	t.Helper()
	dir := abs(t, "render-cache", v.Input)
	macKey, err := hex.DecodeString(v.Parameters["macKey"])
	if err != nil {
		t.Fatal(err)
	}
	c := rendercache.Cache{Dir: dir, Build: v.Parameters["build"], MACKey: macKey}
	key, err := rendercache.Key(v.Parameters["sourceDigest"], v.Parameters["build"])
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Get(key)
	if v.Verdict == "miss" {
		if !errors.Is(err, rendercache.ErrMiss) || !bytes.Contains([]byte(err.Error()), []byte(v.Error)) {
			t.Fatalf("want a miss (%s) with %q, got %v", v.Rule, v.Error, err)
		}
		return
	}
	verdict(t, v, err)
	keyDoc, _ := json.Marshal(map[string]string{"build": v.Parameters["build"], "schema": "kubectl-ql3/render-cache@v2", "sourceDigest": v.Parameters["sourceDigest"]})
	wantKey := domainDigest("render-cache-key", "v1", canonical(t, keyDoc))
	var f struct {
		Entry json.RawMessage `json:"entry"`
	}
	data := file(t, "render-cache", filepath.Join(v.Input, hex.EncodeToString(mustHex(t, wantKey))+".json"))
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	mac := hmac.New(sha256.New, macKey)
	mac.Write(append([]byte("kubectl-ql3/render-cache-mac/v1\x00"), f.Entry...))
	want := map[string]string{"key": wantKey, "mac": "hmac-sha256:" + hex.EncodeToString(mac.Sum(nil))}
	digests(t, v, want, map[string]string{"key": key, "mac": rendercache.MAC(macKey, f.Entry)})
}

// mustHex is the 32 bytes of a sha256: digest.
func mustHex(t *testing.T, d string) []byte {
	t.Helper()
	b, err := hex.DecodeString(d[len("sha256:"):])
	if err != nil || len(b) != sha256.Size {
		t.Fatalf("not a digest: %s", d)
	}
	return b
}
