package rendercache

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

func TestLockKey(t *testing.T) {
	// The documented input: canonical JSON of {build, lockFile, schema}
	// under the render-cache-key domain.
	doc := `{"build":"` + buildA + `","lockFile":"` + srcA + `","schema":"` + LockSchema + `"}`
	want := canon.DigestBytes(DomainKey, []byte(doc))
	if got, err := LockKey(srcA, buildA); err != nil || got != want {
		t.Errorf("LockKey = %q, %v; want %q", got, err, want)
	}
	if render, _ := Key(srcA, buildA); render == want {
		t.Errorf("a lock key equals the render key of the same digest")
	}
	if _, err := LockKey("sha256:abc", buildA); !fail.Is(err, fail.Invalid) {
		t.Errorf("lock file not a digest: %v, want invalid", err)
	}
}

func TestPutGetLock(t *testing.T) {
	c := &Cache{Dir: filepath.Join(t.TempDir(), "render"), Build: buildA, MACKey: testKey}
	key, _ := LockKey(srcA, buildA)
	if _, err := c.GetLock(key); !errors.Is(err, ErrMiss) || !strings.Contains(err.Error(), "no entry") {
		t.Fatalf("empty cache: %v, want a miss: no entry", err)
	}
	if err := c.PutLock(&LockEntry{Key: key, LockFile: srcA, Lock: json.RawMessage(`{"schema":"x"}`)}); err != nil {
		t.Fatal(err)
	}
	e, err := c.GetLock(key)
	if err != nil {
		t.Fatal(err)
	}
	if e.Schema != LockSchema || e.Key != key || e.LockFile != srcA || string(e.Lock) != `{"schema":"x"}` {
		t.Errorf("got %+v", e)
	}
	// A render entry is never a lock entry, nor the other way round, even
	// under the right name and MAC.
	render, _ := Key(srcA, buildA)
	if err := c.Put(entryFor(t, render)); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(c.path(render), c.path(key)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetLock(key); !errors.Is(err, ErrMiss) {
		t.Errorf("render entry read as a lock entry: %v", err)
	}
	if err := c.PutLock(&LockEntry{Key: key, LockFile: srcA, Lock: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(c.path(key), c.path(render)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(render); !errors.Is(err, ErrMiss) {
		t.Errorf("lock entry read as a render entry: %v", err)
	}
	// Without the key nothing is written.
	if err := (&Cache{Dir: c.Dir}).PutLock(&LockEntry{Key: key, LockFile: srcA, Lock: json.RawMessage(`{}`)}); err == nil {
		t.Errorf("stored without a MAC key")
	}
}

func TestParseLockEntry(t *testing.T) {
	key, _ := LockKey(srcA, buildA)
	head := `{"schema":"` + LockSchema + `","key":"` + key + `","lockFile":"` + srcA + `"`
	tests := []struct {
		name, data, want string // want "" = accepted
	}{
		{"good", head + `,"lock":{}}`, ""},
		{"good, trailing space", head + `,"lock":{}}` + " \n", ""},
		{"member twice", head + `,"lock":{},"lock":{}}`, `member "lock" twice`},
		{"unknown member", head + `,"lock":{},"x":1}`, `unknown field "x"`},
		{"data after", head + `,"lock":{}}{}`, "data after the entry"},
		{"lock absent", head + `}`, "lock: want an object"},
		{"lock null", head + `,"lock":null}`, "lock: want an object"},
		{"lock an array", head + `,"lock":[]}`, "lock: want an object"},
		{"other schema", strings.Replace(head, LockSchema, Schema, 1) + `,"lock":{}}`, "schema"},
		{"lockFile not a digest", strings.Replace(head, srcA, "sha256:ab", 1) + `,"lock":{}}`, "must be digests"},
		{"not an object", `[]`, "want"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseLockEntry([]byte(tt.data))
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.want != "" && (!fail.Is(err, fail.Invalid) || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("err %v, want invalid: %s", err, tt.want)
			}
		})
	}
}
