package main

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

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
	fi, err := os.Stat(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("directory %s mode %04o\n", dir, fi.Mode().Perm())
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

// record is the -record file: the start and stop of every run, one line
// each ("start HOST TIME", "stop HOST TIME", RFC 3339 with nanoseconds),
// and an exclusive flock held for the process's life, so a run that starts
// while another still runs on the same volume sees the lock taken.
type record struct {
	path string
	f    *os.File
	host string
}

// startRecord takes the lock (without waiting), reads the earlier runs,
// appends this start, and says what it found: how many runs, when the last
// one stopped ("never" if it did not record a stop), and whether the lock
// was free.
func startRecord(path string) (*record, string) {
	host, _ := os.Hostname()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, "record error: " + err.Error()
	}
	lock := "free"
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock = "held by another process (" + err.Error() + ")"
	}
	before, err := os.ReadFile(path)
	if err != nil {
		return nil, "record error: " + err.Error()
	}
	runs, stopped := 0, "never"
	for _, line := range strings.Split(strings.TrimSpace(string(before)), "\n") {
		switch fields := strings.Fields(line); {
		case len(fields) == 3 && fields[0] == "start":
			runs, stopped = runs+1, "never"
		case len(fields) == 3 && fields[0] == "stop":
			stopped = fields[2]
		}
	}
	r := &record{path: path, f: f, host: host}
	now := r.append("start")
	return r, fmt.Sprintf("record %s: %d earlier runs, the last stopped %s; lock %s; started %s", path, runs, stopped, lock, now)
}

// append writes "WHAT HOST TIME" and syncs it; it returns TIME.
func (r *record) append(what string) string {
	now := time.Now().UTC().Format(time.RFC3339Nano)
	if _, err := fmt.Fprintf(r.f, "%s %s %s\n", what, r.host, now); err != nil {
		return "error: " + err.Error()
	}
	if err := r.f.Sync(); err != nil {
		return "error: " + err.Error()
	}
	return now
}

// stop records this run's stop and releases the lock (closing the file).
func (r *record) stop() {
	if r == nil {
		return
	}
	r.append("stop")
	r.f.Close()
}
