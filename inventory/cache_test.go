package inventory

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory/rendercache"
)

// lockedFixture is the v3.0.0 fixture with its lock, in memory at /rel.
func lockedFixture(t *testing.T) filesys.FileSystem {
	t.Helper()
	fs := fixtureFS(t, "v3.0.0")
	l, _ := fixtureLock(t, "v3.0.0", "3.0.0")
	data, err := l.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := fs.WriteFile("/rel/"+LockFile, data); err != nil {
		t.Fatal(err)
	}
	return fs
}

func testCache(t *testing.T) *rendercache.Cache {
	t.Helper()
	return &rendercache.Cache{Dir: filepath.Join(t.TempDir(), "render"), Build: DigestBytes("x", []byte("test build")), MACKey: bytes.Repeat([]byte{7}, rendercache.KeySize)}
}

// readEntry is the entry in file p, read as c reads it.
func readEntry(t *testing.T, c *rendercache.Cache, p string) *rendercache.Entry {
	t.Helper()
	e, err := c.Get(DigestPrefix + strings.TrimSuffix(filepath.Base(p), ".json"))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// forge writes e to file p with c's key: an entry a key holder wrote,
// whatever it holds.
func forge(t *testing.T, c *rendercache.Cache, p string, e *rendercache.Entry) {
	t.Helper()
	if err := c.Put(e); err != nil {
		t.Fatal(err)
	}
	if q := filepath.Join(c.Dir, strings.TrimPrefix(e.Key, DigestPrefix)+".json"); q != p {
		if err := os.Rename(q, p); err != nil {
			t.Fatal(err)
		}
	}
}

// wireBytes is what the ceremony would send for the objects: each one's
// JSON, in order.
func wireBytes(t *testing.T, r *Release) []byte {
	t.Helper()
	var b bytes.Buffer
	objs := r.Objects
	if r.Lean != nil {
		objs = nil
		for i := range r.Lean.Len() {
			o, err := r.Lean.Object(i)
			if err != nil {
				t.Fatal(err)
			}
			objs = append(objs, o)
		}
	}
	for _, o := range objs {
		data, err := json.Marshal(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(data)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// entryFile is the only entry in c.
func entryFile(t *testing.T, c *rendercache.Cache) string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(c.Dir, "*.json"))
	if err != nil || len(m) != 1 {
		t.Fatalf("want one cache entry, got %q (%v)", m, err)
	}
	return m[0]
}

func loadCached(t *testing.T, fs filesys.FileSystem, c *rendercache.Cache) (*Release, CacheUse) {
	t.Helper()
	return loadCachedWith(t, fs, c, Options{})
}

// loadCachedWith is loadCached with opts; a hit with opts.Lean holds its
// objects in Lean only.
func loadCachedWith(t *testing.T, fs filesys.FileSystem, c *rendercache.Cache, opts Options) (*Release, CacheUse) {
	t.Helper()
	r, l, use, err := LoadReleaseCached(fs, "/rel", opts, c)
	if err != nil {
		t.Fatalf("LoadReleaseCached: %v", err)
	}
	if use.Hit && opts.Lean != (r.Lean != nil && r.Objects == nil) {
		t.Fatalf("a hit with Lean %v: Lean %v, %d decoded objects", opts.Lean, r.Lean != nil, len(r.Objects))
	}
	if r.RenderDigest != l.Render.Digest || r.InventoryDigest != l.Render.InventoryDigest || r.SourceDigest != l.Source.Digest {
		t.Fatalf("release digests differ from the lock's")
	}
	return r, use
}

func TestLoadReleaseCachedMissThenHit(t *testing.T) {
	fs := lockedFixture(t)
	fresh, _, err := LoadRelease(fs, "/rel", Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := testCache(t)

	r1, use := loadCached(t, fs, c)
	if use.Hit || !use.Stored || use.Reason != "no entry" {
		t.Errorf("first load: %+v, want a stored miss with reason %q", use, "no entry")
	}
	st, err := os.Stat(entryFile(t, c))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("entry mode %v, want 0600", st.Mode().Perm())
	}
	if dst, _ := os.Stat(c.Dir); dst.Mode().Perm() != 0o700 {
		t.Errorf("cache dir mode %v, want 0700", dst.Mode().Perm())
	}

	r2, use := loadCached(t, fs, c)
	if !use.Hit || use.String() != "cache hit" {
		t.Errorf("second load: %+v, want a hit", use)
	}
	r3, use := loadCachedWith(t, fs, c, Options{Lean: true})
	if !use.Hit || r3.RenderDigest != r2.RenderDigest || len(r3.Inventory) != len(r2.Inventory) {
		t.Errorf("lean load: %+v, want a hit with the same digests and inventory", use)
	}
	for name, r := range map[string]*Release{"miss": r1, "hit": r2, "lean hit": r3} {
		if !bytes.Equal(wireBytes(t, fresh), wireBytes(t, r)) {
			t.Errorf("%s: objects differ from LoadRelease's", name)
		}
		if r.ControlNamespace != fresh.ControlNamespace || strings.Join(r.Images, ",") != strings.Join(fresh.Images, ",") || len(r.Roles) != len(fresh.Roles) || len(r.Sources) != len(fresh.Sources) {
			t.Errorf("%s: release metadata differs from LoadRelease's", name)
		}
	}
}

const notOurs = "entry not written with this installation's key"

// A corrupted, forged or foreign entry only costs a render: the objects
// are the fresh render's, byte for byte, and the entry is rewritten.
func TestLoadReleaseCachedBadEntries(t *testing.T) {
	tests := []struct {
		name       string
		edit       func(t *testing.T, c *rendercache.Cache, path string)
		wantReason string
	}{
		{"garbage", func(t *testing.T, _ *rendercache.Cache, p string) { write(t, p, []byte("{not json")) }, notOurs},
		{"truncated", func(t *testing.T, _ *rendercache.Cache, p string) {
			data, _ := os.ReadFile(p)
			write(t, p, data[:len(data)/2])
		}, notOurs},
		{"edited without the key", func(t *testing.T, _ *rendercache.Cache, p string) {
			// One value changed in the file, the mac and every claimed digest kept.
			data, _ := os.ReadFile(p)
			out := bytes.Replace(data, []byte(`"log-level":"info"`), []byte(`"log-level":"xinfo"`), 1)
			if bytes.Equal(out, data) {
				t.Fatal("the entry holds no log-level to edit")
			}
			write(t, p, out)
		}, notOurs},
		{"written with another key", func(t *testing.T, c *rendercache.Cache, p string) {
			e := readEntry(t, c, p)
			other := *c
			other.MACKey = bytes.Repeat([]byte{8}, rendercache.KeySize)
			forge(t, &other, p, e)
		}, notOurs},
		{"no mac", func(t *testing.T, c *rendercache.Cache, p string) {
			out, _ := json.Marshal(readEntry(t, c, p))
			write(t, p, out)
		}, notOurs},
		{"tampered object with the key", func(t *testing.T, c *rendercache.Cache, p string) {
			// Change one value, keep every digest the entry claims.
			e := readEntry(t, c, p)
			tampered := false
			for i, o := range e.Objects {
				if bytes.Contains(o, []byte(`"log-level"`)) {
					e.Objects[i] = bytes.Replace(o, []byte(`"log-level":"`), []byte(`"log-level":"x`), 1)
					tampered = true
				}
			}
			if !tampered {
				t.Fatal("fixture has no log-level to tamper with")
			}
			forge(t, c, p, e)
		}, "entry does not match the lock"},
		{"dropped object with the key", func(t *testing.T, c *rendercache.Cache, p string) {
			e := readEntry(t, c, p)
			e.Objects = e.Objects[:len(e.Objects)-1]
			forge(t, c, p, e)
		}, "entry does not match the lock"},
		{"claims another render with the key", func(t *testing.T, c *rendercache.Cache, p string) {
			e := readEntry(t, c, p)
			e.RenderDigest = DigestBytes("render", []byte("other"))
			forge(t, c, p, e)
		}, "entry is for another release state"},
		{"entry of another key", func(t *testing.T, c *rendercache.Cache, p string) {
			e := readEntry(t, c, p)
			e.Key = DigestBytes("x", []byte("other key"))
			forge(t, c, p, e)
		}, "the entry is for key"},
		{"foreign build", func(t *testing.T, c *rendercache.Cache, _ string) {
			c.Build = DigestBytes("x", []byte("another plugin build"))
		}, "no entry"},
	}
	for _, tt := range tests {
		for _, lean := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/lean=%v", tt.name, lean), func(t *testing.T) {
				badEntry(t, tt.edit, tt.wantReason, Options{Lean: lean})
			})
		}
	}
}

// badEntry: after edit, a load with opts misses for wantReason, returns
// the fresh render's objects, stores them, and the next load hits.
func badEntry(t *testing.T, edit func(t *testing.T, c *rendercache.Cache, path string), wantReason string, opts Options) {
	t.Helper()
	fs := lockedFixture(t)
	fresh, _, err := LoadRelease(fs, "/rel", Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := testCache(t)
	loadCached(t, fs, c)
	edit(t, c, entryFile(t, c))

	r, use := loadCachedWith(t, fs, c, opts)
	if use.Hit || !strings.Contains(use.Reason, wantReason) {
		t.Errorf("use %+v, want a miss mentioning %q", use, wantReason)
	}
	if !bytes.Equal(wireBytes(t, fresh), wireBytes(t, r)) {
		t.Error("objects differ from a fresh render's")
	}
	if !use.Stored {
		t.Error("the fresh render was not stored")
	}
	if _, use = loadCachedWith(t, fs, c, opts); !use.Hit {
		t.Errorf("after the rewrite: %+v, want a hit", use)
	}
}

func write(t *testing.T, p string, data []byte) {
	t.Helper()
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// Changed sources never hit: the render runs and the lock check reports
// the change, exactly as without a cache.
func TestLoadReleaseCachedChangedSources(t *testing.T) {
	tests := []struct {
		name, path, data, wantErr string
	}{
		{"edited file", "/rel/config.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ql3-config\ndata: {log-level: debug}\n", `source.files["config.yaml"]: changed`},
		{"second kustomization", "/rel/Kustomization", "resources: []\n", "kustomiz"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := lockedFixture(t)
			c := testCache(t)
			loadCached(t, fs, c)
			if err := fs.WriteFile(tt.path, []byte(tt.data)); err != nil {
				t.Fatal(err)
			}
			_, _, use, err := LoadReleaseCached(fs, "/rel", Options{}, c)
			wantInvalid(t, err, tt.wantErr)
			if use.Hit || use.Reason != "source files changed" {
				t.Errorf("use %+v, want a miss: source files changed", use)
			}
		})
	}
}

// A release with Secret data is never cached, with or without a key.
func TestLoadReleaseCachedSecretData(t *testing.T) {
	for _, key := range [][]byte{nil, bytes.Repeat([]byte("k"), MinSecretDigestKeyLen)} {
		fs := memFS(t, secretRelease())
		opts := Options{AllowSecretData: true, SecretDigestKey: key}
		r := mustRender(t, fs, opts)
		l, err := NewLock(r, "1.0.0", testClusterIdentity, "v0.1.0")
		if err != nil {
			t.Fatal(err)
		}
		data, _ := l.Marshal()
		if err := fs.WriteFile("/rel/"+LockFile, data); err != nil {
			t.Fatal(err)
		}
		c := testCache(t)
		for range 2 {
			got, _, use, err := LoadReleaseCached(fs, "/rel", opts, c)
			if err != nil {
				t.Fatal(err)
			}
			if use.Hit || use.Stored || !strings.Contains(use.Reason, "Secret data") {
				t.Errorf("key %d bytes: use %+v, want an unstored miss for Secret data", len(key), use)
			}
			if !bytes.Equal(wireBytes(t, r), wireBytes(t, got)) {
				t.Error("objects differ from a fresh render's")
			}
		}
		if err := StoreRender(c, r); err == nil {
			t.Error("StoreRender stored a render with Secret values")
		}
		if m, _ := filepath.Glob(filepath.Join(c.Dir, "*")); len(m) != 0 {
			t.Errorf("cache holds %q, want nothing", m)
		}
	}
}

func TestLoadReleaseCachedDisabled(t *testing.T) {
	fs := lockedFixture(t)
	_, _, use, err := LoadReleaseCached(fs, "/rel", Options{}, nil)
	if err != nil || use.Hit || use.Stored || use.Reason != "disabled" {
		t.Errorf("nil cache: %+v, %v; want a disabled miss", use, err)
	}
}

func TestExactNumbers(t *testing.T) {
	tests := []struct {
		name string
		v    any
		want bool
	}{
		{"scalars", map[string]any{"a": "s", "b": true, "c": nil, "d": int64(3), "e": 1.5}, true},
		{"2^53-1", []any{int64(1<<53 - 1), int64(-1<<53 + 1), float64(1<<53 - 1)}, true},
		{"2^53: 2^53+1 rounds to it", []any{int64(1 << 53)}, false},
		{"float 2^53", map[string]any{"f": float64(1 << 53)}, false},
		{"NaN", []any{math.NaN()}, false},
		{"-2^53", []any{int64(-1 << 53)}, false},
		{"2^53+1", map[string]any{"spec": map[string]any{"n": int64(1<<53 + 1)}}, false},
		{"-(2^53+1) in a list", []any{"x", []any{int64(-1<<53 - 1)}}, false},
		{"negative zero", map[string]any{"z": math.Copysign(0, -1)}, false},
		{"zero", map[string]any{"z": 0.0}, true},
		{"other type", map[string]any{"i": 3}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := exactNumbers(tt.v); got != tt.want {
				t.Errorf("exactNumbers = %t, want %t", got, tt.want)
			}
		})
	}
}

// 2^53+1 and 2^53 have the same render digest (docs/digests.md): a render
// holding such a number is never stored, and a forged entry that swaps one
// for the other, digests intact, is never used.
func TestLoadReleaseCachedInexactNumbers(t *testing.T) {
	files := minimalRelease()
	files["/rel/app.yaml"] = strings.Replace(files["/rel/app.yaml"], "replicas: 0", "replicas: 0\n  progressDeadlineSeconds: 9007199254740993", 1)
	fs := memFS(t, files)
	r := mustRender(t, fs, Options{})
	l, err := NewLock(r, "1.0.0", testClusterIdentity, "v0.1.0")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := l.Marshal()
	if err := fs.WriteFile("/rel/"+LockFile, data); err != nil {
		t.Fatal(err)
	}
	c := testCache(t)
	_, use := loadCached(t, fs, c)
	if use.Stored || !strings.Contains(use.Reason, "2^53") {
		t.Errorf("use %+v, want an unstored miss for numbers beyond 2^53", use)
	}
	// Forge the entry with the neighbouring integer.
	key, _ := rendercache.Key(r.SourceDigest, c.Build)
	e := &rendercache.Entry{Key: key, SourceDigest: r.SourceDigest, RenderDigest: r.RenderDigest, InventoryDigest: r.InventoryDigest}
	forged := false
	for _, o := range r.Objects {
		b, _ := json.Marshal(o.Object)
		if nb := bytes.Replace(b, []byte("9007199254740993"), []byte("9007199254740992"), 1); !bytes.Equal(nb, b) {
			b, forged = nb, true
		}
		e.Objects = append(e.Objects, b)
	}
	if !forged {
		t.Fatal("the render holds no 9007199254740993")
	}
	if err := c.Put(e); err != nil {
		t.Fatal(err)
	}
	got, use := loadCached(t, fs, c)
	if use.Hit || !strings.Contains(use.Reason, "2^53") {
		t.Errorf("forged entry: %+v, want a miss", use)
	}
	if !bytes.Equal(wireBytes(t, r), wireBytes(t, got)) || !bytes.Contains(wireBytes(t, got), []byte("9007199254740993")) {
		t.Error("objects differ from a fresh render's")
	}
}

// TestLoadReleaseCachedLean: a lean hit's objects are read from the entry
// file, in any order and as often as asked, and are the fresh render's;
// one whose bytes change in that file after the load is refused; an
// entry whose objects are not in inventory order (which the decoded path
// sorts) is a lean miss, rendered afresh.
func TestLoadReleaseCachedLean(t *testing.T) {
	fs := lockedFixture(t)
	fresh, _, err := LoadRelease(fs, "/rel", Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := testCache(t)
	loadCached(t, fs, c)
	r, _ := loadCachedWith(t, fs, c, Options{Lean: true})
	defer r.Lean.Close()
	for range 2 {
		for i := r.Lean.Len() - 1; i >= 0; i-- {
			o, err := r.Lean.Object(i)
			want, _ := json.Marshal(fresh.Objects[i].Object)
			if got, _ := json.Marshal(o.Object); err != nil || !bytes.Equal(got, want) || r.Lean.ID(i) != fresh.Inventory[i] {
				t.Fatalf("object %d: %s (%v), want %s", i, got, err, want)
			}
		}
	}
	// The entry file rewritten in place (same inode, same size), object 0
	// changed: the load's MAC check is past, the read checks each object.
	p := entryFile(t, c)
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, bytes.Replace(data, []byte(`"kind":"`), []byte(`"kinD":"`), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	if o, err := r.Lean.Object(0); !fail.Is(err, fail.Unavailable) || !strings.Contains(err.Error(), "changed after the entry was verified") {
		t.Errorf("object 0 changed in the entry file after the load: %v, %v; want unavailable", o, err)
	}
	if _, err := r.Lean.Object(1); err != nil {
		t.Errorf("object 1, unchanged: %v", err)
	}
	badEntry(t, func(t *testing.T, c *rendercache.Cache, p string) {
		e := readEntry(t, c, p)
		e.Objects[0], e.Objects[1] = e.Objects[1], e.Objects[0]
		forge(t, c, p, e)
	}, "entry objects are not in inventory order", Options{Lean: true})
}
