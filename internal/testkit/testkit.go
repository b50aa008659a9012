// Package testkit holds the small helpers several packages' tests share:
// a file written with an exact mode, a command run to its exit code, and
// the worked examples of a doc.
// Only tests import it (internal/arch: test machinery never ships).
package testkit

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
)

// WriteFile writes data to path with exactly mode — os.WriteFile's mode is
// subject to the umask, so the file is chmod'ed after — and returns path.
func WriteFile(t testing.TB, path string, data []byte, mode os.FileMode) string {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	return path
}

// Run runs cmd and returns what it wrote to stdout and to stderr, and its
// exit code (-1: killed by a signal); a command that could not be run at
// all fails t.
func Run(t testing.TB, cmd *exec.Cmd) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %v: %v", cmd.Args, err)
	}
	return out.String(), errb.String(), code
}

var exampleRE = regexp.MustCompile("(?s)<!-- example:([a-z0-9-]+) -->\n```[a-z]*\n(.*?)\n```")

// DocExamples returns the worked examples of docs/FILE: each fenced block
// right after a `<!-- example:NAME -->` line, by NAME. It fails t if the
// doc lacks one of want.
func DocExamples(t testing.TB, file string, want ...string) map[string]string {
	t.Helper()
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", file))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range exampleRE.FindAllStringSubmatch(string(doc), -1) {
		out[m[1]] = m[2]
	}
	for _, name := range want {
		if _, ok := out[name]; !ok {
			t.Fatalf("docs/%s has no example %q", file, name)
		}
	}
	return out
}

// ModuleRoot is the kubectl-ql3 module's root above the working
// directory: the first directory holding go.mod and cmd/kubectl-ql3.
func ModuleRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			if _, err := os.Stat(filepath.Join(d, "cmd", "kubectl-ql3")); err == nil {
				return d, nil
			}
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no kubectl-ql3 module root above %s", wd)
		}
	}
}
