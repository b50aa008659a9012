package deploy

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// nextAfter runs next on a convergence whose pause is pause and whose
// floor is floor (from the cost of the last poll), with a watched change
// already waiting when change is set; it returns what next returned and
// how long it took.
func nextAfter(ctx context.Context, pause, floor time.Duration, change bool) (bool, time.Duration) {
	c := &convergence{o: &Options{pollPause: pause}, backoff: wait.Backoff{Duration: pause, Steps: 1},
		lastCost: int64(floor * convergeReadsPerSecond / time.Second), changed: make(chan struct{}, 1)}
	if change {
		signal(c.changed)
	}
	start := time.Now()
	ok := c.next(ctx)
	return ok, time.Since(start)
}

// next polls at the pause; a watched change cuts it short, never to less
// than the floor, and never makes it wait past the pause; a cancelled
// context ends it. The bounds asserted are an order (the floor was waited
// for; an hour's pause was not), not a speed.
func TestNextPausesFloorsAndWakes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if ok, took := nextAfter(ctx, time.Hour, 0, true); !ok || took > 30*time.Second {
		t.Errorf("a change with no floor: next = %v after %s, want true at once, not after the hour's pause", ok, took)
	}
	if ok, took := nextAfter(ctx, time.Hour, 200*time.Millisecond, true); !ok || took < 200*time.Millisecond || took > 30*time.Second {
		t.Errorf("a change under a 200ms floor: next = %v after %s, want true after the floor, not before it nor after the hour's pause", ok, took)
	}
	// A pause shorter than the floor (pause never returns one, but tests
	// set one with SetPollPause) is never outwaited for the floor's sake.
	if ok, took := nextAfter(ctx, 50*time.Millisecond, convergeMaxPause, true); !ok || took >= convergeMaxPause {
		t.Errorf("a change, a 50ms pause under a %s floor: next = %v after %s, want true at the pause", convergeMaxPause, ok, took)
	}
	if ok, took := nextAfter(ctx, 50*time.Millisecond, 0, false); !ok || took < 50*time.Millisecond {
		t.Errorf("no change: next = %v after %s, want true at the 50ms pause", ok, took)
	}
	done, stop := context.WithCancel(ctx)
	stop()
	if ok, _ := nextAfter(done, time.Hour, 0, false); ok {
		t.Error("a cancelled context: next = true, want false")
	}
}
