package rendercache

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/safefile"
)

// leanCache is a cache holding one entry of three objects under key.
func leanCache(t *testing.T) (c *Cache, key string, objs []json.RawMessage) {
	t.Helper()
	c = &Cache{Dir: filepath.Join(t.TempDir(), "render"), Build: buildA, MACKey: testKey}
	key, _ = Key(srcA, buildA)
	e := entryFor(t, key)
	e.Objects = append(e.Objects,
		json.RawMessage(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"demo"},"data":{"k":"v"}}`),
		json.RawMessage(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"b","namespace":"demo"},"data":{"k":"\u00e9"}}`))
	if err := c.Put(e); err != nil {
		t.Fatal(err)
	}
	return c, key, e.Objects
}

// GetLean reads what Get reads, each object's exact bytes, and holds the
// file rather than its bytes.
func TestGetLean(t *testing.T) {
	c, key, objs := leanCache(t)
	full, err := c.Get(key)
	if err != nil {
		t.Fatal(err)
	}
	e, err := c.GetLean(key)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if e.Key != key || e.Schema != Schema || e.RenderDigest != full.RenderDigest || e.Objects != nil || e.Len() != len(objs) {
		t.Fatalf("GetLean = %+v (%d objects), want the entry's members and %d objects", e.Entry, e.Len(), len(objs))
	}
	if _, ok := e.src.(*safefile.File); !ok {
		t.Errorf("objects read from %T, want the entry file itself (not its bytes in memory)", e.src)
	}
	for i := range objs {
		got, err := e.Object(i)
		if err != nil || !bytes.Equal(got, full.Objects[i]) || !json.Valid(got) {
			t.Errorf("Object(%d) = %s, %v; want %s", i, got, err, full.Objects[i])
		}
	}
}

// An entry GetLean refuses is a miss for the same reasons as Get's: no
// entry, another key's name, bytes not covered by the MAC, data after
// the entry. One rewritten by hand without the framing (its members
// reordered) is read in full, as Get reads it.
func TestGetLeanMiss(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(t *testing.T, data []byte) []byte
		wantErr string // "" = read
	}{
		{"as Put wrote it", func(_ *testing.T, d []byte) []byte { return d }, ""},
		{"trailing newline", func(_ *testing.T, d []byte) []byte { return append(d, '\n') }, ""},
		{"members reordered by hand", func(t *testing.T, d []byte) []byte {
			entry, mac, ok := framed(d)
			if !ok {
				t.Fatal("Put did not frame the entry")
			}
			return []byte(`{ "mac": "` + string(mac) + `", "entry": ` + string(entry) + "}")
		}, ""},
		{"one object byte changed", func(_ *testing.T, d []byte) []byte {
			return bytes.Replace(d, []byte(`"k":"v"`), []byte(`"k":"w"`), 1)
		}, "not written with this installation's key"},
		{"header changed", func(_ *testing.T, d []byte) []byte {
			return bytes.Replace(d, []byte(Schema), []byte(Schema+"x"), 1)
		}, "not written with this installation's key"},
		{"mac cut", func(_ *testing.T, d []byte) []byte { return d[:len(d)-10] }, "not written with this installation's key"},
		{"empty file", func(_ *testing.T, d []byte) []byte { return nil }, "not written with this installation's key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, key, objs := leanCache(t)
			data, err := os.ReadFile(c.path(key))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(c.path(key), tt.edit(t, data), 0o600); err != nil {
				t.Fatal(err)
			}
			e, err := c.GetLean(key)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("GetLean: %v", err)
				}
				defer e.Close()
				if got, err := e.Object(2); err != nil || !bytes.Equal(compact(t, got), objs[2]) {
					t.Errorf("Object(2) = %s, %v; want %s", got, err, objs[2])
				}
				return
			}
			if !errors.Is(err, ErrMiss) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("GetLean = %v, want a miss: %s", err, tt.wantErr)
			}
		})
	}
	c, key, _ := leanCache(t)
	other := copiedUnderOtherKey(t, c, key)
	if _, err := c.GetLean(other); !errors.Is(err, ErrMiss) || !strings.Contains(err.Error(), "is for key") {
		t.Errorf("foreign entry: %v, want a miss", err)
	}
	if _, err := c.GetLean(strings.Replace(key, "sha256:", "sha256:0", 1)[:len(key)]); !errors.Is(err, ErrMiss) {
		t.Errorf("absent entry: %v, want a miss", err)
	}
}

// An entry file changed in place after GetLean verified it (same size,
// one object's bytes) is refused when that object is read again: never
// bytes the MAC did not cover.
func TestGetLeanChangedAfterVerify(t *testing.T) {
	c, key, _ := leanCache(t)
	e, err := c.GetLean(key)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	f, err := os.OpenFile(c.path(key), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("w"), e.spans[1].off+int64(bytes.Index(mustObject(t, e, 1), []byte(`"v"`))+1)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := e.Object(0); err != nil {
		t.Errorf("Object(0), unchanged: %v", err)
	}
	if got, err := e.Object(1); !fail.Is(err, fail.Unavailable) || !strings.Contains(err.Error(), "changed after the entry was verified") || got != nil {
		t.Errorf("Object(1) = %s, %v; want unavailable: changed after the entry was verified", got, err)
	}
}

func mustObject(t *testing.T, e *LeanEntry, i int) []byte {
	t.Helper()
	b, err := e.Object(i)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func compact(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// FuzzGetLean: for any entry member, framed and MACed as Put would (with
// or without trailing whitespace, some of it across the 4 KiB GetLean
// reads of the file's end) or written with its members reordered,
// GetLean reads exactly what Get reads — both miss, or both give the same
// members and the same bytes of each object.
func FuzzGetLean(f *testing.F) {
	key, _ := Key(srcA, buildA)
	entry := func(objs ...string) []byte {
		e := &Entry{Schema: Schema, Key: key, SourceDigest: srcA, RenderDigest: srcB, InventoryDigest: srcB}
		for _, o := range objs {
			e.Objects = append(e.Objects, json.RawMessage(o))
		}
		b, _ := json.Marshal(e)
		return b
	}
	good := entry(`{"kind":"Namespace"}`, ` {"a":[1,{"b":"\u00e9"}]}`)
	big := entry(`{"kind":"ConfigMap","data":{"k":"`+strings.Repeat("x", 5000)+`"}}`, `{"kind":"Namespace"}`)
	for form := range uint8(4) {
		f.Add(good, form)
		f.Add(big, form)
	}
	f.Add(big, uint8(3+4*24)) // 4,096 bytes of trailing whitespace
	f.Add([]byte(`{"schema":"`+Schema+`"}`), uint8(0))
	f.Fuzz(func(t *testing.T, entry []byte, form uint8) {
		c := &Cache{Dir: t.TempDir(), Build: buildA, MACKey: testKey}
		mac := MAC(testKey, entry)
		var file []byte
		switch form % 4 {
		case 0:
			file = []byte(`{"entry":` + string(entry) + `,"mac":"` + mac + `"}`)
		case 1:
			file = []byte(`{"entry":` + string(entry) + `,"mac":"` + mac + "\"}\n\t ")
		case 2:
			file = []byte(`{"mac":"` + mac + `","entry":` + string(entry) + `}`)
		default: // 4,000 to 4,252 bytes of trailing whitespace
			file = []byte(`{"entry":` + string(entry) + `,"mac":"` + mac + `"}` + strings.Repeat(" ", 4000+int(form/4)*4))
		}
		if err := os.WriteFile(c.path(key), file, 0o600); err != nil {
			t.Fatal(err)
		}
		full, errFull := c.Get(key)
		lean, errLean := c.GetLean(key)
		if (errFull == nil) != (errLean == nil) {
			t.Fatalf("Get: %v; GetLean: %v", errFull, errLean)
		}
		if errFull != nil {
			return
		}
		defer lean.Close()
		got := lean.Entry
		got.Objects = full.Objects
		if !reflect.DeepEqual(&got, full) || lean.Len() != len(full.Objects) {
			t.Fatalf("GetLean %+v (%d objects), Get %+v", lean.Entry, lean.Len(), full)
		}
		for i, want := range full.Objects {
			if got, err := lean.Object(i); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("Object(%d) = %q, %v; Get read %q", i, got, err, want)
			}
		}
	})
}

// An entry whose MAC verifies but which does not parse is a miss naming
// the parse error, not the key: the MAC is checked first, over all of it.
func TestGetLeanParseErrorAfterMAC(t *testing.T) {
	c := &Cache{Dir: t.TempDir(), Build: buildA, MACKey: testKey}
	key, _ := Key(srcA, buildA)
	entry := `{"schema":"` + Schema + `","extra":1,"key":"` + key + `","objects":[` + strings.Repeat(`{"k":"`+strings.Repeat("v", 100)+`"},`, 100) + `{}]}`
	file := `{"entry":` + entry + `,"mac":"` + MAC(testKey, []byte(entry)) + `"}`
	if err := os.WriteFile(c.path(key), []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetLean(key); !errors.Is(err, ErrMiss) || !strings.Contains(err.Error(), `unknown field "extra"`) {
		t.Errorf("GetLean = %v, want a miss naming the unknown field", err)
	}
}
