// Package fleet rolls one release out to many targets — control
// namespaces on many clusters — in waves (docs/fleet.md). It is a ceremony
// of ceremonies: every target moves by ceremony/deploy's own preflight,
// apply and resume, through its own Head, and the waves' state is read back
// from those Heads, never kept by the driver. A killed driver loses
// nothing: a rerun skips the targets whose Head committed the plan's
// preflight, resumes those applying it, and applies the rest.
package fleet

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"sync"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/ceremony/fleet/fleetfile"
	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// Connector opens the cluster behind target t of fleet f: its kubeconfig
// (f.Path(t.Kubeconfig), or the caller's default) and context.
type Connector func(f *fleetfile.Fleet, t fleetfile.Target) (deploy.Cluster, error)

// Options are what every fleet command shares.
type Options struct {
	// Connect opens a target's cluster.
	Connect Connector
	// Deploy is the template of every target's deploy.Options: FS,
	// ToolVersion, Timeout, Parallelism, SignKey, RenderCache, Inventory.
	// Cluster, Progress and ReceiptsDir are set per target.
	Deploy deploy.Options
	// ReceiptsDir holds one directory per target, named after it, for its
	// receipts (default: <fleet dir>/receipts), so that targets sharing
	// generation numbers never share a receipt name.
	ReceiptsDir string
	// Parallel bounds the targets locked or preflighted at once
	// (default 4); apply follows each wave's maxParallel.
	Parallel int
	// Progress receives one line per target as it moves, and each
	// target's own ceremony lines prefixed with its name; nil is quiet.
	Progress io.Writer

	mu sync.Mutex // serialises Progress lines

	// opened holds the targets connected in this command, so apply,
	// read-back, gate and soak share one client and one RESTMapper
	// (discovery) per target instead of connecting at every step; at most
	// openedMax of them, the least recently used let go (connected again
	// when next needed), so that a command's memory does not grow with
	// the fleet.
	openMu sync.Mutex
	opened map[string]*slot
	ticks  uint64
}

// openedMax bounds the targets a command keeps connected (Options.opened).
const openedMax = 32

// slot is one target's connection, made at most once at a time.
type slot struct {
	mu   sync.Mutex
	tg   *target
	used uint64 // the tick of its last open
}

// slotOf is target name's slot, made (and the least recently used slot
// beyond openedMax let go) when there is none.
func (o *Options) slotOf(name string) *slot {
	o.openMu.Lock()
	defer o.openMu.Unlock()
	if o.opened == nil {
		o.opened = map[string]*slot{}
	}
	o.ticks++
	sl := o.opened[name]
	if sl == nil {
		sl = &slot{}
		o.opened[name] = sl
		if len(o.opened) > openedMax {
			lru, oldest := "", o.ticks
			for n, s := range o.opened {
				if n != name && s.used < oldest {
					lru, oldest = n, s.used
				}
			}
			delete(o.opened, lru) // whoever holds its target keeps using it
		}
	}
	sl.used = o.ticks
	return sl
}

func (o *Options) parallel() int {
	if o.Parallel <= 0 {
		return 4
	}
	return o.Parallel
}

// say prints one progress line.
func (o *Options) say(format string, args ...any) {
	if o.Progress == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	fmt.Fprintf(o.Progress, "fleet: "+format+"\n", args...)
}

// receipts is target t's receipts directory.
func (o *Options) receipts(f *fleetfile.Fleet, t fleetfile.Target) string {
	root := o.ReceiptsDir
	if root == "" {
		root = filepath.Join(f.Dir, "receipts")
	}
	return filepath.Join(root, t.Name)
}

// target is one target opened: its cluster and its deploy options.
type target struct {
	fleetfile.Target
	cl deploy.Cluster
	do deploy.Options
}

// open connects target t, once per command while it stays among the
// openedMax most recently opened (a failed connection is tried again at
// the next step), and prepares its deploy options.
func (o *Options) open(f *fleetfile.Fleet, t fleetfile.Target) (*target, error) {
	if o.Connect == nil {
		return nil, fail.Errorf(fail.Other, "fleet: no connector")
	}
	sl := o.slotOf(t.Name)
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.tg != nil {
		return sl.tg, nil
	}
	cl, err := o.Connect(f, t)
	if err != nil {
		return nil, fmt.Errorf("target %s: %w", t.Name, err)
	}
	do := o.Deploy
	do.Cluster, do.ReceiptsDir = cl, o.receipts(f, t)
	do.Progress = &prefixWriter{o: o, prefix: "  " + t.Name + ": "}
	sl.tg = &target{Target: t, cl: cl, do: do}
	return sl.tg, nil
}

// prefixWriter writes each line it is given to o.Progress, prefixed.
type prefixWriter struct {
	o      *Options
	prefix string
	buf    bytes.Buffer
}

func (w *prefixWriter) Write(p []byte) (int, error) {
	if w.o.Progress == nil {
		return len(p), nil
	}
	w.o.mu.Lock()
	defer w.o.mu.Unlock()
	w.buf.Write(p)
	for {
		i := bytes.IndexByte(w.buf.Bytes(), '\n')
		if i < 0 {
			return len(p), nil
		}
		line := w.buf.Next(i + 1)
		fmt.Fprintf(w.o.Progress, "%s%s", w.prefix, line)
	}
}

// each runs fn for every target of f (in f's order), at most limit at a
// time, and returns the results in that order; it stops starting targets
// once ctx is done.
func each[R any](ctx context.Context, f *fleetfile.Fleet, limit int, fn func(t fleetfile.Target) R) []R {
	out := make([]R, len(f.Targets))
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	for i, t := range f.Targets {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			out[i] = fn(t)
		})
	}
	wg.Wait()
	return out
}

// exitOf is err's exit code (0: none).
func exitOf(err error) int {
	if err == nil {
		return 0
	}
	return fail.ClassOf(err).ExitCode()
}

// decisive is the class of the fleet's error from its targets' errors:
// tamper before a conflict before invalid input before any other failure
// before an unknown outcome (a rerun settles that one).
func decisive(errs []error) fail.Class {
	rank := map[fail.Class]int{fail.Tamper: 5, fail.Conflict: 4, fail.Invalid: 3, fail.Other: 2, fail.Unavailable: 1}
	class, best := fail.Other, 0
	for _, err := range errs {
		if err == nil {
			continue
		}
		if c := fail.ClassOf(err); rank[c] > best {
			class, best = c, rank[c]
		}
	}
	return class
}
