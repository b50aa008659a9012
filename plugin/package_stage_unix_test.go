//go:build unix

package plugin_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// A named pipe as --bundle (or --lock) would block the stage forever: it
// is refused before anything is read or written.
func TestCLIPackageStageRefusesAFIFO(t *testing.T) {
	dir := t.TempDir()
	priv, _ := writeKeyPair(t, dir)
	fifo, lock := filepath.Join(dir, "pipe"), filepath.Join(dir, "lock.json")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lock, []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, flag := range []string{"--bundle", "--lock"} {
		args := map[string]string{"--bundle": lock, "--lock": lock}
		args[flag] = fifo
		_, stderr, code := run(t, nil, "package", "stage", "--layout", filepath.Join(dir, "layout"), "--name", pkgRepo,
			"--lock", args["--lock"], "--bundle", args["--bundle"], "--signing-key", priv)
		if code != fail.Invalid.ExitCode() || !strings.Contains(stderr, flag+" "+fifo+": ") || !strings.Contains(stderr, "not a regular file") {
			t.Errorf("%s a FIFO: exit %d, want %d naming it: %s", flag, code, fail.Invalid.ExitCode(), stderr)
		}
	}
}
