package plugin_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qinglong/kubectl-ql3/ceremony/worker/delivery"
	"github.com/qinglong/kubectl-ql3/internal/testkit"
)

// runBounded runs the built binary like run, but kills it after limit: a
// command that blocks (on a FIFO, say) fails the test instead of hanging
// it. The exit code of a killed run is -1.
func runBounded(t *testing.T, limit time.Duration, env []string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(append(os.Environ(), "KUBECONFIG="+cp.AdminKubeconfig), env...)
	stdout, stderr, code := testkit.Run(t, cmd)
	if ctx.Err() != nil {
		code = -1
	}
	return stdout, stderr, code
}

// badKeyFiles writes, in dir, one key file per way a digest key file must
// be refused, each holding a key long enough to be accepted otherwise, and
// returns them with the reason the refusal must name.
func badKeyFiles(t *testing.T, dir string) []struct{ name, path, reason string } {
	t.Helper()
	key := []byte("0123456789abcdef0123456789abcdef0123456789abcdef\n")
	write := func(name string, data []byte, mode os.FileMode) string {
		return testkit.WriteFile(t, filepath.Join(dir, name), data, mode)
	}
	good := write("good-key", key, 0o600)
	link := filepath.Join(dir, "link-key")
	fifo := filepath.Join(dir, "fifo-key")
	if err := os.Symlink(good, link); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	return []struct{ name, path, reason string }{
		{"symbolic link", link, "a symbolic link"},
		{"group readable", write("group-key", key, 0o640), "mode 0640 is readable or writable by group or others"},
		{"world readable", write("world-key", key, 0o604), "mode 0604 is readable or writable by group or others"},
		{"oversize", write("big-key", bytes.Repeat([]byte("k"), 4097), 0o600), "4097 bytes, more than the cap of 4096"},
		{"named pipe", fifo, "not a regular file"},
		{"directory", dir, "not a regular file"},
	}
}

// Both digest key files get the keyset file's hardening through the
// built binary: a symbolic link, a group- or world-readable mode, more
// than 4096 bytes, a named pipe (which an unbounded read blocks on) or a
// directory is invalid input (exit 2) naming the flag and the file,
// promptly; the same key in an owner-only regular file is accepted.
func TestDigestKeyFileHardening(t *testing.T) {
	ns, stageNS, keyFile, wdir := wkSetup(t)
	d := wkDelivery(t, wdir, ns, "d-key", "cred-key", "", 1)
	cmds := []struct {
		flag string
		args func(key string) []string
	}{
		{"--secret-digest-key-file", func(key string) []string {
			return []string{"render", fixtureDir("v3.0.0"), "--allow-secret-data", "--secret-digest-key-file", key}
		}},
		{"--token-digest-key-file", func(key string) []string {
			return []string{"worker", "publish", "--wait=false", "--delivery", d, "--token-digest-key-file", key, "--stage-namespace", stageNS}
		}},
	}
	for _, c := range cmds {
		for _, bad := range badKeyFiles(t, t.TempDir()) {
			t.Run(c.flag+"/"+bad.name, func(t *testing.T) {
				_, stderr, code := runBounded(t, 30*time.Second, nil, c.args(bad.path)...)
				if code != 2 || !strings.Contains(stderr, c.flag) || !strings.Contains(stderr, bad.path) || !strings.Contains(stderr, bad.reason) {
					t.Fatalf("exit %d, want 2 naming %s, %s and %q:\n%s", code, c.flag, bad.path, bad.reason, stderr)
				}
			})
		}
	}
	if _, stderr, code := runBounded(t, 30*time.Second, nil, cmds[0].args(keyFile)...); code != 0 {
		t.Fatalf("render with an owner-only key file: exit %d\n%s", code, stderr)
	}
	if _, err := cp.Clientset().CoreV1().Secrets(ns).Get(context.Background(), delivery.SecretName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("credential Secret after the refused publishes: %v, want not found", err)
	}
}
