// Command rusage runs a command and writes its rusage — peak resident set
// (KiB), user and system CPU time (ns) — as one line on file descriptor 3.
//
// The benchmarks time every client through it because Linux starts a
// child's ru_maxrss at the resident set of the process that forked it
// (exec records the old address space's high-water mark, and Go forks by
// vfork, sharing the parent's): measured straight from the benchmark, a
// small client would report the benchmark's own RSS. This process is a few
// MiB, the floor of every figure.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: rusage COMMAND [ARG...] 3>FILE")
		os.Exit(2)
	}
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		fmt.Fprintln(os.Stderr, "rusage:", err)
		os.Exit(2)
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	out := os.NewFile(3, "rusage")
	fmt.Fprintf(out, "%d %d %d\n", ru.Maxrss, ru.Utime.Nano(), ru.Stime.Nano())
	os.Exit(cmd.ProcessState.ExitCode())
}
