package deploy

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory"
)

// The convergence read (docs/head.md §6 step 7, docs/ceremony.md §6.5)
// reads every applied object back from the API server and checks it with
// kstatus until it is Current. It never trusts the apply response for
// this: the read is a fresh observation of the object's existence, UID and
// generation, and it is what the converge transcript records.
//
// It starts while the objects are still being applied (applyAll runs
// watch in the background): each object is read once its own apply has
// answered, so that waiting on controllers overlaps the rest of the
// apply. A read made before the last object was applied counts for an
// object without a metadata.generation (nothing the release applies later
// can make it not Current); an object with a generation read Current then
// is read once more after the whole apply, since a later object (an
// autoscaler, say) can change its spec.
//
// Where the release has at least listMin objects still pending of one kind
// in one namespace, they are read with one paginated LIST instead of one
// GET each. A LIST needs the `list` verb, which `kubectl ql3 rbac` does not
// grant (it cannot be limited by name): when the LIST is forbidden, that
// kind and namespace fall back to GETs by name for the rest of the command.
//
// Polls back off: the pause after a poll starts at convergeFirstPoll and
// doubles up to convergePollEvery (wait.Backoff), and is never shorter than
// the poll's own requests at convergeReadsPerSecond, up to convergeMaxPause:
// hundreds of objects waiting on a controller, read by name, cost about
// convergeReadsPerSecond requests a second, not one per object per poll.
//
// After the apply, the workloads still waited for are watched by name where
// the deployer's RBAC rules allow it (watchChanges): each change ends the
// pause (though never below the floor), so that a rollout's end is read when
// it happens. The watch only wakes the poll; the poll's read is recorded.
const (
	listMin  = 8
	listPage = 500
	// listWaste: when the first page shows that the namespace holds more
	// than listWaste times as many objects of the kind as we need, the
	// remaining objects are read by GET.
	listWaste = 4
	// The first re-read comes soon (small releases converge at once); the
	// interval then doubles up to convergePollEvery.
	convergeFirstPoll      = 100 * time.Millisecond
	convergeReadsPerSecond = 50
	convergeMaxPause       = 5 * time.Second
	// progressEvery bounds how often the progress display is refreshed.
	progressEvery = 100 * time.Millisecond
)

type groupKey struct{ apiVersion, kind, namespace string }

// reader is the state of one command's convergence read.
type reader struct {
	o      *Options
	mu     sync.Mutex
	noList map[groupKey]bool // LIST forbidden or wasteful: GET by name
	// size is the release's number of objects of each kind in each
	// namespace: a LIST is wasteful against that, not against the few
	// still pending (or applied so far).
	size  map[groupKey]int
	lists atomic.Int64
	gets  atomic.Int64
}

// convergence is one command's convergence read: started by applyAll
// while objects are applied, finished by converge.
type convergence struct {
	o *Options
	r *reader
	p *progress

	mu       sync.Mutex
	total    int
	order    []inventory.Identity // applied, in the order their applies answered
	current  map[inventory.Identity]objectResult
	early    map[inventory.Identity]bool // read Current before the apply finished
	message  map[inventory.Identity]string
	polls    int
	backoff  wait.Backoff
	lastCost int64
	shown    time.Time
	wake     chan struct{}
	// rv is each object's resourceVersion at its last read: where a watch
	// of it starts. changed is signalled by the watches (watchChanges).
	rv       map[inventory.Identity]string
	changed  chan struct{}
	watching bool
}

func (o *Options) newConvergence(ids []inventory.Identity) *convergence {
	size := map[groupKey]int{}
	for _, id := range ids {
		size[groupKey{id.APIVersion, id.Kind, id.Namespace}]++
	}
	total := len(ids)
	c := &convergence{o: o, r: &reader{o: o, noList: map[groupKey]bool{}, size: size}, p: o.progress(), total: total,
		current: map[inventory.Identity]objectResult{}, early: map[inventory.Identity]bool{}, message: map[inventory.Identity]string{},
		backoff: pollBackoff(), wake: make(chan struct{}, 1), rv: map[inventory.Identity]string{}, changed: make(chan struct{}, 1)}
	c.p.start(total)
	return c
}

// pollBackoff is the pause between polls before the cost floor of pause:
// 100 ms doubling up to convergePollEvery, with 10% jitter.
func pollBackoff() wait.Backoff {
	return wait.Backoff{Duration: convergeFirstPoll, Factor: 2, Jitter: 0.1, Steps: math.MaxInt32, Cap: convergePollEvery}
}

// add records that an object's apply answered: it may be read from now on.
func (c *convergence) add(id inventory.Identity) {
	c.mu.Lock()
	c.order = append(c.order, id)
	c.mu.Unlock()
	signal(c.wake)
	c.refresh(false)
}

// pending is the applied objects not read Current yet.
func (c *convergence) pending() []inventory.Identity {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ids []inventory.Identity
	for _, id := range c.order {
		if _, ok := c.current[id]; !ok {
			ids = append(ids, id)
		}
	}
	return ids
}

// poll reads ids once with at most par requests in flight and records
// what it saw; early marks reads made while the apply goes on.
func (c *convergence) poll(ctx context.Context, ids []inventory.Identity, par int, early bool) []objectResult {
	before := c.r.lists.Load() + c.r.gets.Load()
	res := c.r.read(ctx, ids, par)
	c.mu.Lock()
	c.polls++
	c.lastCost = c.r.lists.Load() + c.r.gets.Load() - before
	for _, rr := range res {
		if rr.rv != "" {
			c.rv[rr.ID] = rr.rv
		}
		if rr.err == nil {
			c.current[rr.ID], c.early[rr.ID] = rr, early
			delete(c.message, rr.ID)
			continue
		}
		delete(c.current, rr.ID)
		c.message[rr.ID] = rr.err.Error()
	}
	c.mu.Unlock()
	c.refresh(true)
	return res
}

// pause is the wait before the next poll: the backoff's next step, but at
// least the last poll's requests at convergeReadsPerSecond (floor), at
// most convergeMaxPause.
func (c *convergence) pause() (d, floor time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d = c.backoff.Step()
	floor = min(time.Duration(c.lastCost)*time.Second/convergeReadsPerSecond, convergeMaxPause)
	if c.o.pollPause > 0 {
		return c.o.pollPause, floor
	}
	return min(max(d, floor), convergeMaxPause), floor
}

// refresh shows the counts and what still waits (at most every
// progressEvery unless forced).
func (c *convergence) refresh(force bool) {
	c.mu.Lock()
	now := time.Now()
	if !force && now.Sub(c.shown) < progressEvery {
		c.mu.Unlock()
		return
	}
	c.shown = now
	var waiting []waitingObject
	for _, id := range c.order {
		if _, ok := c.current[id]; ok {
			continue
		}
		if msg, ok := c.message[id]; ok {
			waiting = append(waiting, waitingObject{id.String(), msg})
		}
	}
	applied, current := len(c.order), len(c.current)
	c.mu.Unlock()
	c.p.update(applied, current, waiting)
}

// watch reads the applied objects back while the apply goes on, until stop
// is closed (applyAll closes it when the last object was applied: the
// read in flight is finished first) or ctx ends (a failed apply cancels
// it). It uses a quarter of --parallelism, leaving the rest to the
// applies.
func (c *convergence) watch(ctx context.Context, stop <-chan struct{}) {
	par := max(1, c.o.Parallelism/4)
	for {
		if ids := c.pending(); len(ids) > 0 {
			c.poll(ctx, ids, par, true)
			d, _ := c.pause()
			select {
			case <-ctx.Done():
				return
			case <-stop:
				return
			case <-time.After(d):
			}
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-stop:
			return
		case <-c.wake:
		}
	}
}

// converge is apply step 5: read every object back and wait, bounded by
// the timeout, until kstatus says it is Current. It continues the read
// applyAll started (a fresh one when there is none). h is the applying
// Head, whose ways out the advice on a rollout that cannot progress names.
func (o *Options) converge(parent context.Context, applied []objectResult, h *Head) (string, error) {
	ctx, cancel := context.WithTimeout(parent, o.Timeout)
	defer cancel()
	c := o.takeConvergence(applied)
	defer c.p.finish()
	pending := c.leftAfterApply(applied)
	for {
		ids := make([]inventory.Identity, len(pending))
		for j, i := range pending {
			ids[j] = applied[i].ID
		}
		var res []objectResult
		if len(ids) > 0 {
			res = c.poll(ctx, ids, o.Parallelism, false)
		}
		still, err := o.convergeVerdict(parent, c, res, pending, h)
		if err != nil {
			return "", err
		}
		if len(still) == 0 {
			c.p.finish()
			o.say("converge: read back in %d poll(s) with %d LIST and %d GET request(s)", c.polls, c.r.lists.Load(), c.r.gets.Load())
			break
		}
		pending = still
		c.watchChanges(ctx, applied, pending)
		if !c.next(ctx) {
			return "", o.notReady(parent, c, applied, pending, h)
		}
	}
	done := make([]objectResult, len(applied))
	c.mu.Lock()
	for i, a := range applied {
		done[i] = c.current[a.ID]
	}
	c.mu.Unlock()
	return transcriptDigest("converge", done)
}

// takeConvergence takes over the read applyAll started, or starts a fresh
// one over applied (resume of a Head whose apply ran in another process).
func (o *Options) takeConvergence(applied []objectResult) *convergence {
	c := o.conv
	o.conv = nil
	if c != nil {
		return c
	}
	ids := make([]inventory.Identity, len(applied))
	for i, a := range applied {
		ids[i] = a.ID
	}
	c = o.newConvergence(ids)
	for _, id := range ids {
		c.add(id)
	}
	return c
}

// leftAfterApply returns the indices in applied of the objects still to
// read once the apply is over: not read Current yet, or read Current
// early with a generation a later object may have changed. Polls start
// from the shortest pause again (the watch's backoff has grown meanwhile).
func (c *convergence) leftAfterApply(applied []objectResult) []int {
	var pending []int
	c.mu.Lock()
	defer c.mu.Unlock()
	c.backoff = pollBackoff()
	for i, a := range applied {
		rr, ok := c.current[a.ID]
		if !ok || (c.early[a.ID] && rr.Generation > 0) {
			pending = append(pending, i)
		}
	}
	return pending
}

// convergeVerdict sorts one poll's results res (of the objects pending):
// it returns the indices still not Current, or the error that ends the
// wait now: an object the deployer may not read (waiting cannot grant a
// permission), or one kstatus says Failed (a Deployment past its
// progressDeadlineSeconds), explained by its pods.
func (o *Options) convergeVerdict(ctx context.Context, c *convergence, res []objectResult, pending []int, h *Head) ([]int, error) {
	var still []int
	var denied []error
	var failed []inventory.Identity
	for j, rr := range res {
		if rr.err == nil {
			continue
		}
		if apierrors.IsForbidden(rr.err) || apierrors.IsUnauthorized(rr.err) {
			denied = append(denied, fmt.Errorf("%s: %w", rr.ID, rr.err))
		}
		if rr.Result == status.FailedStatus.String() {
			failed = append(failed, rr.ID)
		}
		still = append(still, pending[j])
	}
	if len(denied) > 0 {
		c.p.finish()
		for _, err := range denied {
			o.say("converge: %v", err)
		}
		return nil, fail.Errorf(fail.Invalid, "converge: %d object(s) cannot be read back (the deployer needs get on each applied object: `kubectl ql3 rbac` prints the rules; the Head stays applying, `kubectl ql3 resume` continues once granted): %w", len(denied), utilerrors.NewAggregate(denied))
	}
	if len(failed) > 0 {
		c.p.finish()
		errs, _ := o.explained(ctx, c, failed)
		return nil, fail.Errorf(fail.Other, "converge: %d object(s) failed (%s): %w", len(failed), stuckAdvice(h), utilerrors.NewAggregate(errs))
	}
	return still, nil
}

// notReady is the error of a convergence that ran out of --timeout with
// the objects applied[pending] not Current, each with its last message.
// A workload whose pods show a cause that waiting does not clear is told
// so: rerunning does not settle it, and the advice names the ways out.
func (o *Options) notReady(ctx context.Context, c *convergence, applied []objectResult, pending []int, h *Head) error {
	c.p.finish()
	ids := make([]inventory.Identity, len(pending))
	for j, i := range pending {
		ids[j] = applied[i].ID
	}
	errs, stuck := o.explained(ctx, c, ids)
	if stuck {
		return fail.Errorf(fail.Unavailable, "converge: %d object(s) not ready within %s, and their pods show a cause that waiting does not clear by itself, so rerunning will not settle it (%s): %w", len(pending), o.Timeout, stuckAdvice(h), utilerrors.NewAggregate(errs))
	}
	return fail.Errorf(fail.Unavailable, "converge: %d object(s) not ready within %s (the Head stays applying generation %d; `kubectl ql3 resume --preflight FILE` continues): %w", len(pending), o.Timeout, h.Generation, utilerrors.NewAggregate(errs))
}

// explained is, for each of ids, its last kstatus message with what its
// pods show (said on the progress too), and whether any workload's pods
// show a cause that waiting does not clear.
func (o *Options) explained(ctx context.Context, c *convergence, ids []inventory.Identity) ([]error, bool) {
	causes := o.explainRollouts(ctx, ids)
	var errs []error
	stuck := false
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		msg := c.message[id]
		if rc, ok := causes[id]; ok {
			msg += "; " + rc.text
			stuck = stuck || rc.stuck
		}
		errs = append(errs, fmt.Errorf("%s: %s", id, msg))
		o.say("converge: %s not ready: %s", id, msg)
	}
	return errs, stuck
}

// stuckAdvice names the ways out of the applying Head h whose transition
// waiting does not finish: resume once the cause is fixed, or, for an
// upgrade or a rollback, a transition that supersedes it.
func stuckAdvice(h *Head) string {
	return waysOut(h, "fix the cause", "leave", "")
}

// waysOut is what to do with the applying Head h: first, then resume; or,
// for an upgrade or a rollback, how generation N is superseded (its
// preflight with flags added).
func waysOut(h *Head, first, how, flags string) string {
	s := fmt.Sprintf("the Head stays applying generation %d: %s and run `kubectl ql3 resume --preflight FILE`", h.Generation, first)
	if sup := supersedeCommands(h, flags); sup != "" {
		return s + fmt.Sprintf(", or %s generation %d by superseding it: %s", how, h.Generation, sup)
	}
	return s + fmt.Sprintf(" (an applying %s is never superseded, docs/ceremony.md §7.5)", h.Transition.Kind)
}

// supersedeCommands are the transitions that supersede the applying Head
// h (docs/ceremony.md §7.5), with flags added to the preflight; "" when
// h's transition, an install or a retire, cannot be superseded.
func supersedeCommands(h *Head, flags string) string {
	if h.Transition.Kind != TransitionUpgrade && h.Transition.Kind != TransitionRollback {
		return ""
	}
	tok := h.Expected()
	back := fmt.Sprintf("`kubectl ql3 rollback DIR --expected-head %s --supersede %d`", tok, h.Generation)
	if flags != "" {
		back = fmt.Sprintf("`kubectl ql3 preflight DIR --transition rollback --supersede %d --expected-head %s%s`", h.Generation, tok, flags)
	}
	return fmt.Sprintf("a release above %s, `kubectl ql3 preflight DIR --transition upgrade --supersede %d --expected-head %s%s`, or back to the last committed deployment, %s (then `kubectl ql3 apply`)",
		h.Current.Version, h.Generation, tok, flags, back)
}

// read reads ids once and returns their results in the same order: an
// error for each object that is missing, unreadable or not Current.
func (r *reader) read(ctx context.Context, ids []inventory.Identity, par int) []objectResult {
	out := make([]objectResult, len(ids))
	groups := map[groupKey][]int{}
	var order []groupKey
	for i, id := range ids {
		k := groupKey{id.APIVersion, id.Kind, id.Namespace}
		if groups[k] == nil {
			order = append(order, k)
		}
		groups[k] = append(groups[k], i)
	}
	var mu sync.Mutex
	var byGet []int
	var g errgroup.Group
	g.SetLimit(par)
	for _, k := range order {
		idx := groups[k]
		if len(idx) < listMin || r.skipList(k) {
			mu.Lock() // a LIST started above may be handing its objects back
			byGet = append(byGet, idx...)
			mu.Unlock()
			continue
		}
		g.Go(func() error {
			if left := r.list(ctx, k, ids, idx, out); len(left) > 0 {
				mu.Lock()
				byGet = append(byGet, left...)
				mu.Unlock()
			}
			return nil
		})
	}
	_ = g.Wait() // no goroutine returns an error: each object's is in out
	for _, i := range byGet {
		if ctx.Err() != nil {
			out[i] = objectResult{ID: ids[i], err: ctx.Err()}
			continue
		}
		g.Go(func() error {
			r.gets.Add(1)
			u, err := r.o.Cluster.Get(ctx, ids[i])
			if err != nil {
				out[i] = objectResult{ID: ids[i], err: err}
				return nil
			}
			out[i] = checkCurrent(ids[i], u)
			return nil
		})
	}
	_ = g.Wait()
	return out
}

func (r *reader) skipList(k groupKey) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.noList[k]
}

// list reads the objects ids[idx] (one kind, one namespace) with a
// paginated LIST, writing their results into out. It returns the indices
// left to read by GET: all of them if the LIST is forbidden, the rest if it
// turns out to cover far more objects than the release's.
func (r *reader) list(ctx context.Context, k groupKey, ids []inventory.Identity, idx []int, out []objectResult) []int {
	gv, err := schema.ParseGroupVersion(k.apiVersion)
	if err != nil {
		return idx
	}
	want := make(map[string]int, len(idx))
	for _, i := range idx {
		want[ids[i].Name] = i
	}
	rest := func() []int {
		left := make([]int, 0, len(want))
		for _, i := range want {
			left = append(left, i)
		}
		return left
	}
	opts := metav1.ListOptions{Limit: listPage}
	for page := 0; ; page++ {
		r.lists.Add(1)
		list, err := r.o.Cluster.ListPage(ctx, gv.WithKind(k.kind), k.namespace, opts)
		if err != nil {
			if apierrors.IsForbidden(err) {
				r.stopListing(k, "forbidden (no `list` grant)")
				return rest()
			}
			for _, i := range want {
				out[i] = objectResult{ID: ids[i], err: err}
			}
			return nil
		}
		for j := range list.Items {
			u := &list.Items[j]
			if i, ok := want[u.GetName()]; ok {
				delete(want, u.GetName())
				out[i] = checkCurrent(ids[i], u)
			}
		}
		if len(want) == 0 {
			return nil
		}
		if page == 0 {
			if n := list.GetRemainingItemCount(); n != nil && int(*n)+len(list.Items) > listWaste*max(len(idx), r.size[k]) {
				r.stopListing(k, fmt.Sprintf("%d objects of the kind there, %d of them the release's", int(*n)+len(list.Items), max(len(idx), r.size[k])))
				return rest()
			}
		}
		if list.GetContinue() == "" {
			break
		}
		opts.Continue = list.GetContinue()
	}
	gr := schema.GroupResource{Group: gv.Group, Resource: k.kind}
	for name, i := range want {
		out[i] = objectResult{ID: ids[i], err: apierrors.NewNotFound(gr, name)}
	}
	return nil
}

func (r *reader) stopListing(k groupKey, why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.noList[k] {
		r.noList[k] = true
		where := k.namespace
		if where == "" {
			where = "the cluster"
		}
		r.o.say("converge: LIST of %s %s in %s: %s; reading them by name", k.apiVersion, k.kind, where, why)
	}
}

// checkCurrent is one object's convergence result: kstatus on what was
// just read.
func checkCurrent(id inventory.Identity, u *unstructured.Unstructured) objectResult {
	r := objectResult{ID: id, rv: u.GetResourceVersion()}
	st, err := status.Compute(u)
	if err != nil {
		r.err = err
		return r
	}
	r.Result, r.UID, r.Generation = st.Status.String(), string(u.GetUID()), u.GetGeneration()
	if st.Status != status.CurrentStatus {
		r.err = fmt.Errorf("%s: %s", st.Status, st.Message)
	}
	return r
}
