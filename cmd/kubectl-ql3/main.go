// Command kubectl-ql3 is the kubectl ql3 plugin.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"
	_ "k8s.io/client-go/plugin/pkg/client/auth" // exec, OIDC and cloud kubeconfigs

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/plugin"
)

// gcPercent is the garbage collector's target when GOGC is not set. A
// command holds its release decoded from start to end; at Go's default
// (100) the heap grows to twice what is live before each collection, and
// at 10,000 objects that doubling is most of the peak resident set. 50
// keeps the peak 14% lower there (diff, preflight) for a few percent more
// CPU (docs/performance.md, "Ten thousand objects").
const gcPercent = 50

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	err := plugin.NewCmdRoot(streams).ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		os.Exit(fail.ClassOf(err).ExitCode())
	}
}
