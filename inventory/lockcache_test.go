package inventory

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/qinglong/kubectl-ql3/inventory/rendercache"
)

// bigLock is the v3.0.0 fixture's lock with n more ConfigMaps in its
// inventory (a consistent lock: sorted, counted, its inventory digest
// recomputed), written to /rel of an in-memory file system, and its bytes.
func bigLock(t testing.TB, n int) (filesys.FileSystem, []byte) {
	t.Helper()
	l, _ := fixtureLock(t, "v3.0.0", "3.0.0")
	for i := range n {
		l.Render.Inventory = append(l.Render.Inventory, Identity{APIVersion: "v1", Kind: "ConfigMap", Namespace: l.Target.Namespace, Name: fmt.Sprintf("cm-%05d", i)})
	}
	SortIdentities(l.Render.Inventory)
	l.Render.Count = len(l.Render.Inventory)
	var err error
	if l.Render.InventoryDigest, err = InventoryDigest(l.Render.Inventory); err != nil {
		t.Fatal(err)
	}
	data, err := l.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	fs := filesys.MakeFsInMemory()
	if err := fs.WriteFile("/rel/"+LockFile, data); err != nil {
		t.Fatal(err)
	}
	return fs, data
}

// lockKeyOf is the lock entry key of lock file bytes data in c.
func lockKeyOf(t testing.TB, c *rendercache.Cache, data []byte) (key, file string) {
	t.Helper()
	sum := sha256.Sum256(data)
	file = DigestPrefix + hex.EncodeToString(sum[:])
	key, err := rendercache.LockKey(file, c.Build)
	if err != nil {
		t.Fatal(err)
	}
	return key, file
}

// TestReadLockCached: a lock of at least KeptLockMin bytes is parsed once
// and its parse kept; the next read takes the kept parse (shown by a kept
// parse a key holder changed being what is read), and one that fails a
// check is a miss read from the file again.
func TestReadLockCached(t *testing.T) {
	fs, data := bigLock(t, 1000)
	if len(data) < KeptLockMin {
		t.Fatalf("fixture lock is %d bytes, below %d", len(data), KeptLockMin)
	}
	want, err := ReadLock(fs, "/rel")
	if err != nil {
		t.Fatal(err)
	}
	c := testCache(t)
	key, file := lockKeyOf(t, c, data)
	read := func(t *testing.T) *Lock {
		t.Helper()
		got, err := readLockCached(fs, "/rel", c)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if diff := cmp.Diff(want, read(t)); diff != "" {
		t.Fatalf("first read (-parse +got):\n%s", diff)
	}
	kept, err := c.GetLock(key)
	if err != nil {
		t.Fatalf("parse not kept: %v", err)
	}
	if diff := cmp.Diff(want, mustKept(t, kept.Lock)); diff != "" {
		t.Fatalf("kept parse (-parse +kept):\n%s", diff)
	}
	changed := *want
	changed.Release.Version = "9.9.9"
	keep(t, c, key, file, &changed)
	if got := read(t); got.Release.Version != "9.9.9" {
		t.Fatalf("second read did not take the kept parse: version %s", got.Release.Version)
	}
	for name, edit := range map[string]func(){
		"fails a field check": func() { bad := changed; bad.Render.Count++; keep(t, c, key, file, &bad) },
		"names another file":  func() { keep(t, c, key, DigestBytes("x", []byte("other")), &changed) },
		"another key's MAC": func() {
			other := *c
			other.MACKey = []byte(strings.Repeat("k", rendercache.KeySize))
			keep(t, &other, key, file, &changed)
		},
	} {
		t.Run(name, func(t *testing.T) {
			edit()
			if diff := cmp.Diff(want, read(t)); diff != "" {
				t.Fatalf("read (-parse +got):\n%s", diff)
			}
		})
	}
}

func mustKept(t *testing.T, raw []byte) *Lock {
	t.Helper()
	l, err := keptLock(raw)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// keep stores l as the kept parse under key in c, naming lock file file.
func keep(t *testing.T, c *rendercache.Cache, key, file string, l *Lock) {
	t.Helper()
	raw, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.PutLock(&rendercache.LockEntry{Key: key, LockFile: file, Lock: raw}); err != nil {
		t.Fatal(err)
	}
}

// TestReadLockCachedSmall: a lock below KeptLockMin is parsed and nothing
// is stored.
func TestReadLockCachedSmall(t *testing.T) {
	fs := lockedFixture(t)
	c := testCache(t)
	if _, err := readLockCached(fs, "/rel", c); err != nil {
		t.Fatal(err)
	}
	if ents, err := os.ReadDir(c.Dir); err == nil || len(ents) > 0 {
		t.Fatalf("stored %d files for a small lock (%v)", len(ents), err)
	}
}

// TestReadLockCachedInvalid: an invalid large lock fails as ReadLock fails
// and nothing is kept.
func TestReadLockCachedInvalid(t *testing.T) {
	fs, data := bigLock(t, 1000)
	bad := strings.Replace(string(data), "count: ", "count: x", 1)
	if err := fs.WriteFile("/rel/"+LockFile, []byte(bad)); err != nil {
		t.Fatal(err)
	}
	c := testCache(t)
	_, want := ReadLock(fs, "/rel")
	_, err := readLockCached(fs, "/rel", c)
	if want == nil || err == nil || err.Error() != want.Error() {
		t.Fatalf("error %v, want %v", err, want)
	}
	if m, _ := filepath.Glob(filepath.Join(c.Dir, "*")); len(m) > 0 {
		t.Fatalf("kept %q for an invalid lock", m)
	}
}
