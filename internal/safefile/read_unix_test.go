//go:build linux || darwin

package safefile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// Each Perm refuses exactly the bits it denies, naming the path, the mode
// and the repair; both refuse what is not a regular file.
func TestReadPerm(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("key material"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // not subject to umask
			t.Fatal(err)
		}
		return p
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		path    string
		perm    Perm
		limit   int64
		wantErr string
	}{
		{name: "owner only 0600", path: write("a", 0o600), perm: OwnerOnly},
		{name: "owner only 0400", path: write("b", 0o400), perm: OwnerOnly},
		{name: "group readable under OwnerOnly", path: write("c", 0o640), perm: OwnerOnly, wantErr: "mode 0640 is readable or writable by group or others; a key file must be owner-only; run chmod go-rwx"},
		{name: "world readable under OwnerOnly", path: write("d", 0o604), perm: OwnerOnly, wantErr: "mode 0604 is readable"},
		{name: "world readable under NotShared", path: write("e", 0o644), perm: NotShared},
		{name: "group writable under NotShared", path: write("f", 0o660), perm: NotShared, wantErr: "mode 0660 is group or world writable; run chmod go-w"},
		{name: "fifo", path: fifo, perm: OwnerOnly, wantErr: "not a regular file"},
		{name: "over the cap", path: write("g", 0o600), perm: OwnerOnly, limit: 3, wantErr: "12 bytes, more than the cap of 3"},
		{name: "no cap", path: write("h", 0o600), perm: OwnerOnly, limit: -1, wantErr: "size cap -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			limit := tt.limit
			if limit == 0 {
				limit = 1024
			}
			data, err := Read(tt.path, limit, tt.perm)
			if tt.wantErr == "" {
				if err != nil || string(data) != "key material" {
					t.Fatalf("Read = %q, %v; want the file's bytes", data, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), tt.path) || !fail.Is(err, fail.Invalid) {
				t.Fatalf("Read = %v; want invalid, naming %s: %q", err, tt.path, tt.wantErr)
			}
		})
	}
}

// A file that changes while it is read is refused as unavailable, for
// every part of its identity.
func TestReadFileChangedDuringRead(t *testing.T) {
	dir := t.TempDir()
	content := []byte(`{"keys":[]}`)
	changes := map[string]func(t *testing.T, p string){
		"appended": func(t *testing.T, p string) {
			f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.Write([]byte(" "))
			f.Close()
		},
		"rewritten in place, same size": func(t *testing.T, p string) {
			if err := os.WriteFile(p, content, 0o644); err != nil {
				t.Fatal(err)
			}
			later := time.Now().Add(time.Hour)
			os.Chtimes(p, later, later)
		},
		"replaced by rename": func(t *testing.T, p string) {
			q := p + ".new"
			if err := os.WriteFile(q, content, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(q, p); err != nil {
				t.Fatal(err)
			}
		},
		"mode changed": func(t *testing.T, p string) {
			if err := os.Chmod(p, 0o600); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, change := range changes {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".json")
			if err := os.WriteFile(p, content, 0o644); err != nil {
				t.Fatal(err)
			}
			afterRead = func(path string) { change(t, path) }
			defer func() { afterRead = nil }()
			_, err := Read(p, 1024, NotShared)
			if err == nil || !strings.Contains(err.Error(), "changed while being read") || !fail.Is(err, fail.Unavailable) {
				t.Fatalf("Read = %v, want unavailable: changed while being read", err)
			}
		})
	}
}

// OpenRegular refuses a named pipe without blocking (nobody writes to
// it), and a directory; it opens a regular file and a link to one.
func TestOpenRegular(t *testing.T) {
	dir := t.TempDir()
	fifo, file, link := filepath.Join(dir, "pipe"), filepath.Join(dir, "f"), filepath.Join(dir, "l")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(file, link); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fifo, dir, filepath.Join(dir, "absent")} {
		if f, err := OpenRegular(p); !fail.Is(err, fail.Invalid) || !strings.Contains(fmt.Sprint(err), p) {
			t.Errorf("%s: %v %v, want invalid input naming it", p, f, err)
		}
	}
	for _, p := range []string{file, link} {
		f, err := OpenRegular(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		f.Close()
	}
}

// ReadRegular reads a regular file up to its cap and refuses, invalid
// input naming the path, a named pipe (without blocking: ErrNotRegular on
// the chain), a longer file and an absent one (fs.ErrNotExist on the
// chain).
func TestReadRegular(t *testing.T) {
	dir := t.TempDir()
	fifo, file := filepath.Join(dir, "pipe"), filepath.Join(dir, "f")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("12345"), 0o644); err != nil {
		t.Fatal(err)
	}
	if data, err := ReadRegular(file, 5); err != nil || string(data) != "12345" {
		t.Fatalf("ReadRegular at the cap: %q %v", data, err)
	}
	tests := []struct {
		path  string
		limit int64
		is    error
		want  string
	}{
		{fifo, 5, ErrNotRegular, "not a regular file"},
		{file, 4, nil, "more than the cap of 4 bytes"},
		{filepath.Join(dir, "absent"), 5, fs.ErrNotExist, "no such file"},
		{file, 0, nil, "size cap 0"},
	}
	for _, tt := range tests {
		_, err := ReadRegular(tt.path, tt.limit)
		if !fail.Is(err, fail.Invalid) || !strings.Contains(fmt.Sprint(err), tt.path) || !strings.Contains(fmt.Sprint(err), tt.want) || (tt.is != nil && !errors.Is(err, tt.is)) {
			t.Errorf("ReadRegular(%s, %d) = %v, want invalid naming it: %q", tt.path, tt.limit, err, tt.want)
		}
	}
}
