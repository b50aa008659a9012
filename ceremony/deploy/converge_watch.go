package deploy

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/watch"

	"github.com/qinglong/kubectl-ql3/inventory"
)

// maxWatches bounds the watches converge opens (watchChanges): what a
// small release waits for is a few workloads' rollouts.
const maxWatches = 16

// next waits for the next poll after apply: the pause, cut short when a
// watch saw a watched object change, though never to less than the floor
// counted from the pause's start, and never past the pause itself. It
// returns false when ctx ended first.
func (c *convergence) next(ctx context.Context) bool {
	start := time.Now()
	d, floor := c.pause()
	t := time.NewTimer(d)
	defer t.Stop()
	changed := c.changed
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		case <-changed:
			// Wait out what is left of the floor, or of the pause
			// if it ends first, and no longer for changes.
			left := min(floor, d) - time.Since(start)
			if left <= 0 {
				return true
			}
			changed = nil
			t.Reset(left)
		}
	}
}

// watchChanges watches, once per command, up to maxWatches of the objects
// applied[pending] (still not Current after the first poll that followed
// the apply) that the deployer's RBAC rules let it watch
// (Options.watchable), each from the resourceVersion its last read saw: a
// change wakes the next poll (next), so that a rollout's end is read at
// once instead of up to a pause later. The watch only wakes: what converge
// records is always the poll's own read. A watch that fails or ends leaves
// the timer alone to pace the polls.
func (c *convergence) watchChanges(ctx context.Context, applied []objectResult, pending []int) {
	if c.watching {
		return
	}
	c.watching = true
	n := 0
	for _, i := range pending {
		id := applied[i].ID
		c.mu.Lock()
		rv := c.rv[id]
		c.mu.Unlock()
		if n == maxWatches || rv == "" || !c.o.watchable[id] {
			continue
		}
		n++
		go c.wakeOnChange(ctx, id, rv)
	}
	if n > 0 {
		c.o.say("converge: watching %d workload(s) by name: a change ends the pause before the next poll", n)
	}
}

// wakeOnChange signals changed at each event of a watch of id from rv,
// until ctx ends or the watch does.
func (c *convergence) wakeOnChange(ctx context.Context, id inventory.Identity, rv string) {
	w, err := c.o.Cluster.Watch(ctx, id, rv)
	if err != nil {
		return
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.ResultChan():
			if !ok || ev.Type == watch.Error {
				return
			}
			signal(c.changed)
		}
	}
}

// signal wakes the receiver of ch, a channel of capacity one, unless a
// wake is already waiting there.
func signal(ch chan<- struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
