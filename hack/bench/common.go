package main

import (
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
)

// absPaths makes each non-empty path absolute (every client runs from its
// own work directory), or exits.
func absPaths(ps ...*string) {
	for _, p := range ps {
		if *p == "" {
			continue
		}
		abs, err := filepath.Abs(*p)
		if err != nil {
			die(err)
		}
		*p = abs
	}
}

// thisMachine describes the machine a report was measured on.
func thisMachine(note string) Machine {
	return Machine{CPUs: runtime.NumCPU(), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, Go: runtime.Version(), Note: note}
}

// expectedHead is the token of the Head in namespace ns, as `kubectl ql3
// head` prints it (untimed: it is read before a timed preflight).
func expectedHead(env []string, plugin, ns string) (string, error) {
	p, err := run(env, plugin, "head", "-n", ns, "-o", "jsonpath={.expectedHead}")
	if err != nil {
		return "", fmt.Errorf("head: %w", err)
	}
	return strings.TrimSpace(string(p.stdout)), nil
}
