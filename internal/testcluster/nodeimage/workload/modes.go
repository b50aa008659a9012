package main

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/qinglong/kubectl-ql3/ceremony/envbundle/envcarrier"
)

// digest is "sha256:<hex>" of path's content, or "error: <reason>".
func digest(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "error: " + err.Error()
	}
	return fmt.Sprintf("sha256:%x", sha256.Sum256(b))
}

// bundleDigest is "sha256:<hex>" of the environment bundle at path, read
// now and checked by every carrier rule, or "error: <reason>": a carrier
// error names a position and a rule, never a name or a value.
func bundleDigest(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "error: " + err.Error()
	}
	if _, err := envcarrier.Parse(b); err != nil {
		return "error: " + err.Error()
	}
	return fmt.Sprintf("sha256:%x", sha256.Sum256(b))
}

// copyInto creates dir 0700 and copies each file into it, 0400, under its
// base name (an initContainer moving a projected volume into a private
// tmpfs: the image has no shell). It logs names and digests, never content.
func copyInto(dir string, files []string) int {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		dst := filepath.Join(dir, filepath.Base(f))
		if err := os.WriteFile(dst, b, 0o400); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Printf("copied %s sha256:%x\n", dst, sha256.Sum256(b))
	}
	return 0
}

// appendRecord appends the pod's name (its hostname) to path and says how
// many records path held before: data a previous pod wrote to a volume.
func appendRecord(path string) string {
	before, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return "record error: " + err.Error()
	}
	n := strings.Count(string(before), "\n")
	host, _ := os.Hostname()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return "record error: " + err.Error()
	}
	defer f.Close()
	if _, err := fmt.Fprintln(f, host); err != nil {
		return "record error: " + err.Error()
	}
	if err := f.Sync(); err != nil {
		return "record error: " + err.Error()
	}
	return fmt.Sprintf("record %s held %d records before %s", path, n, host)
}
