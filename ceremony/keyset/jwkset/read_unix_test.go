//go:build linux || darwin

package jwkset

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/testkit"
)

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	content := mustJSON(t, base())
	write := func(name string, data []byte, mode os.FileMode) string {
		return testkit.WriteFile(t, filepath.Join(dir, name), data, mode)
	}
	good := write("good.json", content, 0o644)
	if err := os.Symlink(good, filepath.Join(dir, "link.json")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		path      string
		max       int64
		wantErr   string
		wantClass fail.Class
	}{
		{name: "regular file 0644", path: good},
		{name: "owner only 0400", path: write("ro.json", content, 0o400)},
		{name: "exactly at the cap", path: good, max: int64(len(content))},
		{name: "relative path", path: "good.json", wantErr: "the path must be absolute", wantClass: fail.Invalid},
		{name: "missing", path: filepath.Join(dir, "nope.json"), wantErr: "no such file", wantClass: fail.Invalid},
		{name: "symbolic link", path: filepath.Join(dir, "link.json"), wantErr: "a symbolic link", wantClass: fail.Invalid},
		{name: "directory", path: dir, wantErr: "not a regular file", wantClass: fail.Invalid},
		{name: "fifo", path: filepath.Join(dir, "fifo"), wantErr: "not a regular file", wantClass: fail.Invalid},
		{name: "group writable", path: write("g.json", content, 0o664), wantErr: "mode 0664 is group or world writable", wantClass: fail.Invalid},
		{name: "world writable", path: write("w.json", content, 0o646), wantErr: "mode 0646 is group or world writable", wantClass: fail.Invalid},
		{name: "over the cap", path: good, max: int64(len(content)) - 1, wantErr: "more than the cap", wantClass: fail.Invalid},
		{name: "over the default cap", path: write("big.json", make([]byte, DefaultMaxBytes+1), 0o644), wantErr: "more than the cap of 65536", wantClass: fail.Invalid},
		{name: "cap above the hard cap", path: good, max: HardMaxBytes + 1, wantErr: "size cap 262145", wantClass: fail.Invalid},
		{name: "negative cap", path: good, max: -1, wantErr: "size cap -1", wantClass: fail.Invalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := ReadFile(tt.path, tt.max)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if string(data) != string(content) {
					t.Fatalf("read %d bytes, want the file's %d", len(data), len(content))
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("ReadFile = %v, want an error containing %q", err, tt.wantErr)
			}
			if got := fail.ClassOf(err); got != tt.wantClass {
				t.Fatalf("class %v, want %v", got, tt.wantClass)
			}
		})
	}
}
