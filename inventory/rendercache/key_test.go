//go:build linux || darwin

package rendercache

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/testkit"
)

// The key is created once, owner-only, and read back; a key file that
// fails a check is refused and left as it is.
func TestLoadKey(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "config", "kubectl-ql3")
	path := filepath.Join(dir, keyFile)
	k1, err := LoadKey(path)
	if err != nil || len(k1) != KeySize {
		t.Fatalf("first use: %d bytes, %v", len(k1), err)
	}
	st, _ := os.Stat(path)
	dst, _ := os.Stat(dir)
	if st.Mode().Perm() != 0o600 || dst.Mode().Perm() != 0o700 {
		t.Errorf("modes: key %v, dir %v; want 0600, 0700", st.Mode().Perm(), dst.Mode().Perm())
	}
	if k2, err := LoadKey(path); err != nil || !bytes.Equal(k1, k2) {
		t.Errorf("second use: %v; want the same key", err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, tempPrefix+"*")); len(left) != 0 {
		t.Errorf("temporary files left: %q", left)
	}

	tests := []struct {
		name    string
		make    func(p string)
		wantErr string
	}{
		{"group readable", func(p string) { write(t, p, k1, 0o640) }, "owner-only"},
		{"short", func(p string) { write(t, p, k1[:5], 0o600) }, "want 32"},
		{"long", func(p string) { write(t, p, append(k1, 'x'), 0o600) }, "more than the cap"},
		{"symbolic link", func(p string) {
			if err := os.Symlink(path, p); err != nil {
				t.Fatal(err)
			}
		}, "symbolic link"},
		{"named pipe", func(p string) {
			if err := syscall.Mkfifo(p, 0o600); err != nil {
				t.Fatal(err)
			}
		}, "not a regular file"},
		{"relative path", nil, "absolute"},
		{"directory others can write", func(p string) {
			write(t, p, k1, 0o600)
			if err := os.Chmod(filepath.Dir(p), 0o777); err != nil {
				t.Fatal(err)
			}
		}, "only its owner can write"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), keyFile)
			if tt.make == nil {
				p = keyFile
			} else {
				tt.make(p)
			}
			before, _ := os.Lstat(p)
			_, err := LoadKey(p)
			if !fail.Is(err, fail.Invalid) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("err %v, want invalid mentioning %q", err, tt.wantErr)
			}
			if after, _ := os.Lstat(p); tt.make != nil && (after == nil || after.ModTime() != before.ModTime() || after.Size() != before.Size()) {
				t.Error("the key file was changed")
			}
		})
	}
}

func write(t *testing.T, p string, data []byte, mode os.FileMode) {
	t.Helper()
	testkit.WriteFile(t, p, data, mode)
}

// An entry is used only if it was written with the cache's key: edited
// bytes, another key, no mac, no key at all, a named pipe and an
// oversized file are misses, each without parsing what the file claims.
func TestGetNeedsTheKey(t *testing.T) {
	key, _ := Key(srcA, buildA)
	tests := []struct {
		name    string
		edit    func(c *Cache, p string)
		wantErr string
	}{
		{"edited entry, mac kept", func(_ *Cache, p string) {
			data, _ := os.ReadFile(p)
			write(t, p, bytes.Replace(data, []byte(`"demo"`), []byte(`"evil"`), 1), 0o600)
		}, "not written with this installation's key"},
		{"another key", func(c *Cache, _ string) {
			o := *c
			o.MACKey = bytes.Repeat([]byte{1}, KeySize)
			if err := o.Put(entryFor(t, key)); err != nil {
				t.Fatal(err)
			}
		}, "not written with this installation's key"},
		{"bare entry, no mac", func(_ *Cache, p string) {
			e := entryFor(t, key)
			e.Schema = Schema
			data, _ := json.Marshal(e)
			write(t, p, data, 0o600)
		}, "not written with this installation's key"},
		{"no key to check with", func(c *Cache, _ string) { c.MACKey = nil }, "no render cache key"},
		{"named pipe", func(_ *Cache, p string) {
			os.Remove(p)
			if err := syscall.Mkfifo(p, 0o600); err != nil {
				t.Fatal(err)
			}
		}, "not a regular file"},
		{"oversized", func(_ *Cache, p string) {
			f, err := os.OpenFile(p, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := f.Truncate(MaxEntryBytes + 1); err != nil {
				t.Fatal(err)
			}
		}, "more than the cap"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Cache{Dir: t.TempDir(), Build: buildA, MACKey: testKey}
			if err := c.Put(entryFor(t, key)); err != nil {
				t.Fatal(err)
			}
			tt.edit(c, c.path(key))
			_, err := c.Get(key)
			if !errors.Is(err, ErrMiss) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Get: %v, want a miss mentioning %q", err, tt.wantErr)
			}
		})
	}
	if err := (&Cache{Dir: t.TempDir(), Build: buildA}).Put(entryFor(t, key)); err == nil {
		t.Error("Put without a key stored an entry")
	}
}

// The mac is the documented HMAC: computed here from its definition.
func TestMAC(t *testing.T) {
	key, entry := testKey, []byte(`{"schema":"x"}`)
	want := "hmac-sha256:" + hmacHex(key, append([]byte("kubectl-ql3/render-cache-mac/v1\x00"), entry...))
	if got := MAC(key, entry); got != want {
		t.Errorf("MAC = %s, want %s", got, want)
	}
	if MAC(key, entry) == MAC(bytes.Repeat([]byte{1}, KeySize), entry) {
		t.Error("the MAC does not depend on the key")
	}
}

func hmacHex(key, msg []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write(msg)
	return hex.EncodeToString(m.Sum(nil))
}

// Get on any file content: a miss, or an entry whose file carried the MAC
// of its exact entry bytes under the key.
func FuzzGet(f *testing.F) {
	key, _ := Key(srcA, buildA)
	seed := &Cache{Dir: f.TempDir(), Build: buildA, MACKey: testKey}
	if err := seed.Put(entryFor(f, key)); err != nil {
		f.Fatal(err)
	}
	good, _ := os.ReadFile(seed.path(key))
	f.Add(good)
	f.Add([]byte(`{"entry":{},"mac":""}`))
	f.Add([]byte("{}"))
	c := &Cache{Dir: f.TempDir(), Build: buildA, MACKey: testKey}
	f.Fuzz(func(t *testing.T, data []byte) {
		write(t, c.path(key), data, 0o600)
		got, err := c.Get(key)
		if err != nil {
			if !errors.Is(err, ErrMiss) {
				t.Fatalf("error %v does not wrap ErrMiss", err)
			}
			return
		}
		var file struct {
			Entry json.RawMessage `json:"entry"`
			MAC   string          `json:"mac"`
		}
		if json.Unmarshal(data, &file) != nil || file.MAC != MAC(testKey, file.Entry) || got.Key != key {
			t.Fatalf("Get accepted a file without the entry's MAC: %q", data)
		}
	})
}

// TestGetFramed: Get splits a file as Put writes it without decoding it
// whole, and reads the same entry as the full decoder from any other
// valid form of the file (members swapped, whitespace); the split never
// lets bytes that are not the entry member through: a file whose framing
// holds two entry members, or an edited entry, is a miss.
func TestGetFramed(t *testing.T) {
	key, _ := Key(srcA, buildA)
	c := &Cache{Dir: t.TempDir(), Build: buildA, MACKey: testKey}
	if err := c.Put(entryFor(t, key)); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(c.path(key))
	var f file
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	if e, m, ok := framed(data); !ok || !bytes.Equal(e, f.Entry) || string(m) != f.MAC {
		t.Fatalf("framed(Put's file) = %q, %q, %v; want the entry member and mac", e, m, ok)
	}
	forms := map[string]string{
		"as written":         string(data),
		"trailing newline":   string(data) + "\n",
		"members swapped":    `{"mac":"` + f.MAC + `","entry":` + string(f.Entry) + `}`,
		"spaced":             `{ "entry" : ` + string(f.Entry) + ` , "mac" : "` + f.MAC + `" }`,
		"two entry members":  `{"entry":{},"mac":"x","entry":` + string(f.Entry) + `,"mac":"` + f.MAC + `"}`,
		"entry edited":       strings.Replace(string(data), `"demo"`, `"evil"`, 1),
		"mac of another key": `{"entry":` + string(f.Entry) + `,"mac":"` + MAC(bytes.Repeat([]byte{1}, KeySize), f.Entry) + `"}`,
	}
	hit := map[string]bool{"as written": true, "trailing newline": true, "members swapped": true, "spaced": true}
	for name, form := range forms {
		write(t, c.path(key), []byte(form), 0o600)
		e, err := c.Get(key)
		switch {
		case hit[name] && (err != nil || e.Key != key || len(e.Objects) != 1):
			t.Errorf("%s: Get = %v, %v; want the entry", name, e, err)
		case !hit[name] && !errors.Is(err, ErrMiss):
			t.Errorf("%s: Get = %v, %v; want a miss", name, e, err)
		}
	}
}
