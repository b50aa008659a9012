package rendercache

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

var (
	srcA   = canon.DigestBytes("source", []byte("a"))
	srcB   = canon.DigestBytes("source", []byte("b"))
	buildA = canon.DigestBytes(DomainBuild, []byte("a"))
	buildB = canon.DigestBytes(DomainBuild, []byte("b"))
)

func TestKey(t *testing.T) {
	// The documented input: canonical JSON of {build, schema, sourceDigest}
	// under the render-cache-key domain.
	doc := `{"build":"` + buildA + `","schema":"` + Schema + `","sourceDigest":"` + srcA + `"}`
	want := canon.DigestBytes(DomainKey, []byte(doc))
	tests := []struct {
		name          string
		source, build string
		want          string // "" = differs from want; "error" = invalid
	}{
		{"documented input", srcA, buildA, want},
		{"other source", srcB, buildA, ""},
		{"other build", srcA, buildB, ""},
		{"source not a digest", "sha256:abc", buildA, "error"},
		{"build not a digest", srcA, "v1.2.3", "error"},
		{"empty", "", "", "error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Key(tt.source, tt.build)
			switch tt.want {
			case "error":
				if !fail.Is(err, fail.Invalid) {
					t.Errorf("err %v, want invalid", err)
				}
			case "":
				if err != nil || got == want || !canon.IsDigest(got) {
					t.Errorf("Key = %q, %v; want a digest other than %q", got, err, want)
				}
			default:
				if err != nil || got != tt.want {
					t.Errorf("Key = %q, %v; want %q", got, err, tt.want)
				}
			}
		})
	}
}

func TestBuildDigest(t *testing.T) {
	base := func() *debug.BuildInfo {
		return &debug.BuildInfo{
			GoVersion: "go1.26.0",
			Main:      debug.Module{Path: "github.com/qinglong/kubectl-ql3", Version: "v1.0.0"},
			Deps: []*debug.Module{
				{Path: "github.com/qinglong/kubectl-ql3/third_party/kustomize-api", Version: "v0.20.1", Sum: "h1:a"},
				{Path: "sigs.k8s.io/kustomize/kyaml", Version: "v0.20.1", Sum: "h1:b"},
			},
		}
	}
	d0, err := BuildDigest(BuildOf(base()))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		edit func(*debug.BuildInfo)
		same bool
	}{
		{"identical", func(*debug.BuildInfo) {}, true},
		{"deps reordered", func(b *debug.BuildInfo) { b.Deps[0], b.Deps[1] = b.Deps[1], b.Deps[0] }, true},
		{"plugin version", func(b *debug.BuildInfo) { b.Main.Version = "v1.0.1" }, false},
		{"kustomize version", func(b *debug.BuildInfo) { b.Deps[0].Version = "v0.21.0" }, false},
		{"dependency sum only (devel build)", func(b *debug.BuildInfo) { b.Deps[1].Sum = "h1:c" }, false},
		{"replaced dependency", func(b *debug.BuildInfo) {
			b.Deps[0].Replace = &debug.Module{Path: "example.com/fork", Version: "v0.0.1"}
		}, false},
		{"added dependency", func(b *debug.BuildInfo) { b.Deps = append(b.Deps, &debug.Module{Path: "x", Version: "v1"}) }, false},
		{"go version", func(b *debug.BuildInfo) { b.GoVersion = "go1.26.1" }, false},
		{"vcs revision", func(b *debug.BuildInfo) {
			b.Settings = []debug.BuildSetting{{Key: "vcs.revision", Value: "1111"}, {Key: "vcs.modified", Value: "false"}}
		}, false},
		{"build tags", func(b *debug.BuildInfo) { b.Settings = []debug.BuildSetting{{Key: "-tags", Value: "ql3crash"}} }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := base()
			tt.edit(b)
			d, err := BuildDigest(BuildOf(b))
			if err != nil {
				t.Fatal(err)
			}
			if (d == d0) != tt.same {
				t.Errorf("digest %s vs base %s: same=%t, want %t", d, d0, d == d0, tt.same)
			}
		})
	}
	id, how, err := BuildID()
	if id2, _, _ := BuildID(); err != nil || !canon.IsDigest(id) || id != id2 {
		t.Errorf("BuildID %q (%s, %v) is not a stable digest", id, how, err)
	}
	// A test binary has no VCS stamp and a (devel) main module: it is keyed
	// by its executable as well.
	if !strings.Contains(how, "executable") {
		t.Errorf("BuildID of a test binary: %q, want it keyed by the executable", how)
	}
}

// Two builds the build information does not tell apart must not share
// keys: such builds are named by Identified and keyed by their executable.
func TestBuildIdentified(t *testing.T) {
	vcs := func(rev, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	deps := []*debug.Module{{Path: "github.com/qinglong/kubectl-ql3/third_party/kustomize-api", Version: "v0.20.1", Sum: "h1:a"}}
	tests := []struct {
		name    string
		bi      debug.BuildInfo
		wantWhy string // "" = identified
	}{
		{"released module", debug.BuildInfo{Main: debug.Module{Path: "m", Version: "v1.0.0", Sum: "h1:m"}, Deps: deps}, ""},
		{"devel, clean checkout", debug.BuildInfo{Main: debug.Module{Path: "m", Version: "(devel)"}, Deps: deps, Settings: vcs("abc", "false")}, ""},
		{"devel, no VCS stamp", debug.BuildInfo{Main: debug.Module{Path: "m", Version: "(devel)"}, Deps: deps}, "no module version and no VCS revision"},
		{"devel, modified tree", debug.BuildInfo{Main: debug.Module{Path: "m", Version: "(devel)"}, Deps: deps, Settings: vcs("abc", "true")}, "modified tree"},
		{"version without sum", debug.BuildInfo{Main: debug.Module{Path: "m", Version: "v1.0.0"}, Deps: deps}, "no module version"},
		{"local replacement", debug.BuildInfo{Main: debug.Module{Path: "m", Version: "v1.0.0", Sum: "h1:m"},
			Deps: []*debug.Module{{Path: "github.com/qinglong/kubectl-ql3/third_party/kustomize-api", Version: "v0.20.1", Replace: &debug.Module{Path: "../kustomize"}}}}, "local replacement"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, why := BuildOf(&tt.bi).Identified()
			if ok != (tt.wantWhy == "") || !strings.Contains(why, tt.wantWhy) {
				t.Errorf("Identified = %t, %q; want why %q", ok, why, tt.wantWhy)
			}
		})
	}
}

func entryFor(t testing.TB, key string) *Entry {
	t.Helper()
	return &Entry{Key: key, SourceDigest: srcA, RenderDigest: srcB, InventoryDigest: srcB,
		Objects: []json.RawMessage{json.RawMessage(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"demo"}}`)}}
}

var testKey = []byte("0123456789abcdef0123456789abcdef")

func TestPutGet(t *testing.T) {
	c := &Cache{Dir: filepath.Join(t.TempDir(), "a", "render"), Build: buildA, MACKey: testKey}
	key, _ := Key(srcA, buildA)
	if _, err := c.Get(key); !errors.Is(err, ErrMiss) || !strings.Contains(err.Error(), "no entry") {
		t.Fatalf("empty cache: %v, want a miss: no entry", err)
	}
	if err := c.Put(entryFor(t, key)); err != nil {
		t.Fatal(err)
	}
	e, err := c.Get(key)
	if err != nil {
		t.Fatal(err)
	}
	if e.Schema != Schema || e.Key != key || len(e.Objects) != 1 {
		t.Errorf("got %+v", e)
	}
	ents, _ := os.ReadDir(c.Dir)
	if len(ents) != 1 || ents[0].Name() != strings.TrimPrefix(key, "sha256:")+".json" {
		t.Errorf("cache dir holds %v, want only the entry (no temporary file)", ents)
	}
	info, _ := ents[0].Info()
	dir, _ := os.Stat(c.Dir)
	if info.Mode().Perm() != 0o600 || dir.Mode().Perm() != 0o700 {
		t.Errorf("modes: entry %v, dir %v; want 0600, 0700", info.Mode().Perm(), dir.Mode().Perm())
	}
	// An entry stored under another key's name is a miss.
	other := copiedUnderOtherKey(t, c, key)
	if _, err := c.Get(other); !errors.Is(err, ErrMiss) || !strings.Contains(err.Error(), "is for key") {
		t.Errorf("foreign entry: %v, want a miss", err)
	}
}

// copiedUnderOtherKey copies the entry file of key to another key's name
// (a source digest other than its own) and returns that key.
func copiedUnderOtherKey(t *testing.T, c *Cache, key string) string {
	t.Helper()
	other, _ := Key(srcB, buildA)
	data, err := os.ReadFile(c.path(key))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.path(other), data, 0o600); err != nil {
		t.Fatal(err)
	}
	return other
}

func TestParseEntry(t *testing.T) {
	key, _ := Key(srcA, buildA)
	good, _ := json.Marshal(func() *Entry { e := entryFor(t, key); e.Schema = Schema; return e }())
	tests := []struct {
		name, data, wantErr string
	}{
		{"good", string(good), ""},
		{"trailing data", string(good) + "{}", "data after the entry"},
		{"trailing space", string(good) + "\n", ""},
		{"unknown field", strings.Replace(string(good), `{"schema"`, `{"x":1,"schema"`, 1), "unknown field"},
		{"other schema", strings.Replace(string(good), Schema, "kubectl-ql3/render-cache@v0", 1), "schema"},
		{"bad digest", strings.Replace(string(good), srcA, "sha256:00", 1), "must be digests"},
		{"no objects", strings.Replace(string(good), `"objects":[`, `"objects":[],"x":[`, 1), ""},
		{"object not an object", strings.Replace(string(good), `[{"apiVersion"`, `["s",{"apiVersion"`, 1), "objects[0]"},
		{"not json", "{", "render cache entry"},
		{"member twice", strings.Replace(string(good), `{"schema"`, `{"key":"`+srcB+`","schema"`, 1), "twice"},
		{"objects not an array", strings.Replace(string(good), `"objects":[`, `"objects":{"a":[`, 1) + "}", "want an array"},
		{"objects null", strings.Replace(string(good), `"objects":[`, `"objects":null,"x":[`, 1), "unknown field"},
		{"digest not a string", strings.Replace(string(good), `"renderDigest":"`+srcB+`"`, `"renderDigest":1`, 1), "render cache entry"},
		{"object element cut", strings.TrimSuffix(string(good), "]}"), "render cache entry"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseEntry([]byte(tt.data))
			if tt.name == "no objects" {
				if err == nil {
					t.Error("accepted an entry with an unknown field and no objects")
				}
				return
			}
			if tt.wantErr == "" {
				if err != nil {
					t.Errorf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !fail.Is(err, fail.Invalid) {
				t.Errorf("err %v, want invalid mentioning %q", err, tt.wantErr)
			}
		})
	}
}

// TestParseEntryObjectsAreSlices: the objects are read in place, not
// copied (a 10,000-object entry is not held twice), and are exactly the
// bytes of each element, whatever whitespace surrounds them.
func TestParseEntryObjectsAreSlices(t *testing.T) {
	key, _ := Key(srcA, buildA)
	good, _ := json.Marshal(func() *Entry { e := entryFor(t, key); e.Schema = Schema; return e }())
	spaced := bytes.Replace(good, []byte(`"objects":[`), []byte("\"objects\" : [ \n\t"), 1)
	spaced = bytes.Replace(spaced, []byte("}]}"), []byte("} \n] }"), 1)
	for _, data := range [][]byte{good, spaced} {
		e, err := ParseEntry(data)
		if err != nil {
			t.Fatal(err)
		}
		obj := string(e.Objects[0])
		if !strings.HasPrefix(obj, "{") || !strings.HasSuffix(obj, "}") || !strings.Contains(string(data), obj) {
			t.Fatalf("object %q is not an element of %s", obj, data)
		}
		i := bytes.Index(data, e.Objects[0])
		data[i+1] = ' ' // the object's first member's quote
		if e.Objects[0][1] != ' ' || cap(e.Objects[0]) != len(e.Objects[0]) {
			t.Errorf("object is a copy of the entry's bytes (or may grow into them): %q", e.Objects[0])
		}
	}
}

func FuzzParseEntry(f *testing.F) {
	key, _ := Key(srcA, buildA)
	e := &Entry{Schema: Schema, Key: key, SourceDigest: srcA, RenderDigest: srcB, InventoryDigest: srcB,
		Objects: []json.RawMessage{json.RawMessage(`{"kind":"Namespace"}`)}}
	good, _ := json.Marshal(e)
	f.Add(good)
	f.Add([]byte("{}"))
	f.Add([]byte(`{"schema":"` + Schema + `"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := ParseEntry(data)
		if err != nil {
			if !fail.Is(err, fail.Invalid) {
				t.Fatalf("error class %s: %v", fail.ClassOf(err), err)
			}
			return
		}
		// An accepted entry re-encodes to an accepted entry with the same fields.
		out, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		e2, err := ParseEntry(out)
		if err != nil || e2.Key != e.Key || e2.RenderDigest != e.RenderDigest || len(e2.Objects) != len(e.Objects) {
			t.Fatalf("re-parse: %v", err)
		}
	})
}

func TestPrune(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	c := &Cache{Dir: t.TempDir(), Build: buildA}
	mk := func(name string, age time.Duration) string {
		p := filepath.Join(c.Dir, name)
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, now.Add(-age), now.Add(-age)); err != nil {
			t.Fatal(err)
		}
		return p
	}
	hex := func(s string) string { return strings.Repeat(s, 64) }
	old := mk(hex("a")+".json", 48*time.Hour)
	recent := mk(hex("b")+".json", time.Hour)
	tmp := mk(".tmp-123", 72*time.Hour)
	foreign := mk("notes.txt", 1000*time.Hour)

	tests := []struct {
		name      string
		olderThan time.Duration
		wantN     int
		gone      []string
		kept      []string
	}{
		{"older than 24h", 24 * time.Hour, 2, []string{old, tmp}, []string{recent, foreign}},
		{"again: nothing left that old", 24 * time.Hour, 0, nil, []string{recent, foreign}},
		{"everything", 0, 1, []string{recent}, []string{foreign}},
	}
	for _, tt := range tests {
		n, err := c.Prune(tt.olderThan, now)
		if err != nil || n != tt.wantN {
			t.Errorf("%s: removed %d, %v; want %d", tt.name, n, err, tt.wantN)
		}
		for _, p := range tt.gone {
			if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s: %s still there", tt.name, filepath.Base(p))
			}
		}
		for _, p := range tt.kept {
			if _, err := os.Stat(p); err != nil {
				t.Errorf("%s: %s removed", tt.name, filepath.Base(p))
			}
		}
	}
	if _, err := c.Prune(-time.Hour, now); !fail.Is(err, fail.Invalid) {
		t.Errorf("negative --older-than: %v, want invalid", err)
	}
	missing := &Cache{Dir: filepath.Join(c.Dir, "absent")}
	if n, err := missing.Prune(0, now); n != 0 || err != nil {
		t.Errorf("missing dir: %d, %v; want 0, nil", n, err)
	}
}
