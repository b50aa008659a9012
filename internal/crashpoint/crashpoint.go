//go:build ql3crash

// Package crashpoint is a fault-injection hook, and nothing else: the
// reliability campaign (hack/reliability) sets QL3_CRASH_AT=<point> in the
// environment of a kubectl-ql3 process to make it die by SIGKILL exactly at
// that named point — no deferred call, no cleanup, as with `kill -9` or a
// machine losing power — so that a crash lands reliably in windows too
// narrow to hit with a timer (just before or after the Head commit, between
// writing and linking a receipt). With the variable unset, always outside
// the campaign, At returns at once and has no effect.
//
// The points are: "acquired" (the Head was just moved to applying),
// "applied" (every object applied, before convergence), "retired" (a
// retire's deletes all settled and waited for, before convergence), "before-commit",
// "after-commit", "publish-before-link" and "publish-after-link" (inside
// the no-replace publish of a receipt).
package crashpoint

import (
	"os"
	"time"
)

// Enabled reports whether this binary carries the crash hook.
const Enabled = true

var target = os.Getenv("QL3_CRASH_AT")

// At kills the process with SIGKILL if QL3_CRASH_AT names point.
func At(point string) {
	if target == "" || target != point {
		return
	}
	if p, err := os.FindProcess(os.Getpid()); err == nil {
		_ = p.Kill()
	}
	for { // the signal is asynchronous: never run past the point
		time.Sleep(time.Second)
	}
}
