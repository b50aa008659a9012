package ceremony

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory"
)

// The convergence read (docs/head.md §6 step 7) reads every applied object
// back from the API server and checks it with kstatus until it is Current.
// It never trusts the apply response for this: the read is a fresh
// observation, made after every object was applied, of the object's
// existence, UID and generation, and it is what the converge transcript
// records.
//
// Where the release has at least listMin objects still pending of one kind
// in one namespace, they are read with one paginated LIST instead of one
// GET each. A LIST needs the `list` verb, which `kubectl ql3 rbac` does not
// grant (it cannot be limited by name): when the LIST is forbidden, that
// kind and namespace fall back to GETs by name for the rest of the command.
const (
	listMin  = 8
	listPage = 500
	// listWaste: when the first page shows that the namespace holds more
	// than listWaste times as many objects of the kind as we need, the
	// remaining objects are read by GET.
	listWaste = 4
	// The first re-read comes soon (small releases converge at once); the
	// interval then doubles up to convergePollEvery.
	convergeFirstPoll = 100 * time.Millisecond
)

type groupKey struct{ apiVersion, kind, namespace string }

// reader is the state of one command's convergence read.
type reader struct {
	o      *Options
	mu     sync.Mutex
	noList map[groupKey]bool // LIST forbidden or wasteful: GET by name
	lists  atomic.Int64
	gets   atomic.Int64
}

// converge is apply step 5: read every object back and wait, bounded by
// the timeout, until kstatus says it is Current.
func (o *Options) converge(ctx context.Context, applied []objectResult) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	r := &reader{o: o, noList: map[groupKey]bool{}}
	done := make([]objectResult, len(applied))
	pending := make([]int, len(applied))
	for i := range applied {
		pending[i] = i
	}
	wait := convergeFirstPoll
	for polls := 1; ; polls++ {
		ids := make([]inventory.Identity, len(pending))
		for j, i := range pending {
			ids[j] = applied[i].ID
		}
		res := r.read(ctx, ids)
		var still []int
		var failed, denied []error
		lastMsg := map[int]string{}
		for j, rr := range res {
			i := pending[j]
			if rr.err == nil {
				done[i] = rr
				continue
			}
			lastMsg[i] = rr.err.Error()
			if apierrors.IsForbidden(rr.err) || apierrors.IsUnauthorized(rr.err) {
				denied = append(denied, fmt.Errorf("%s: %w", rr.ID, rr.err))
			}
			if rr.Result == status.FailedStatus.String() {
				failed = append(failed, fmt.Errorf("%s: %w", rr.ID, rr.err))
			}
			still = append(still, i)
		}
		if len(denied) > 0 {
			// Waiting cannot grant a permission: fail now, not at --timeout.
			for _, err := range denied {
				o.say("converge: %v", err)
			}
			return "", fail.Errorf(fail.Invalid, "converge: %d object(s) cannot be read back (the deployer needs get on each applied object: `kubectl ql3 rbac` prints the rules; the Head stays applying, `kubectl ql3 resume` continues once granted): %w", len(denied), utilerrors.NewAggregate(denied))
		}
		if len(failed) > 0 {
			for _, err := range failed {
				o.say("converge: %v", err)
			}
			return "", fail.Errorf(fail.Other, "converge: %d object(s) failed: %w", len(failed), utilerrors.NewAggregate(failed))
		}
		if len(still) == 0 {
			o.say("converge: read back in %d poll(s) with %d LIST and %d GET request(s)", polls, r.lists.Load(), r.gets.Load())
			break
		}
		pending = still
		select {
		case <-ctx.Done():
			var errs []error
			for _, i := range pending {
				errs = append(errs, fmt.Errorf("%s: %s", applied[i].ID, lastMsg[i]))
				o.say("converge: %s not ready: %s", applied[i].ID, lastMsg[i])
			}
			return "", fail.Errorf(fail.Unavailable, "converge: %d object(s) not ready within %s (the Head stays applying; `kubectl ql3 resume` continues): %w", len(pending), o.Timeout, utilerrors.NewAggregate(errs))
		case <-time.After(wait):
		}
		wait = min(2*wait, convergePollEvery)
	}
	return transcriptDigest("converge", done)
}

// read reads ids once and returns their results in the same order: an
// error for each object that is missing, unreadable or not Current.
func (r *reader) read(ctx context.Context, ids []inventory.Identity) []objectResult {
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
	var wg sync.WaitGroup
	sem := make(chan struct{}, r.o.Parallelism)
	for _, k := range order {
		idx := groups[k]
		if len(idx) < listMin || r.skipList(k) {
			byGet = append(byGet, idx...)
			continue
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if left := r.list(ctx, k, ids, idx, out); len(left) > 0 {
				mu.Lock()
				byGet = append(byGet, left...)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, i := range byGet {
		if ctx.Err() != nil {
			out[i] = objectResult{ID: ids[i], err: ctx.Err()}
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			r.gets.Add(1)
			u, err := r.o.Cluster.Get(ctx, ids[i])
			if err != nil {
				out[i] = objectResult{ID: ids[i], err: err}
				return
			}
			out[i] = checkCurrent(ids[i], u)
		})
	}
	wg.Wait()
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
			if n := list.GetRemainingItemCount(); n != nil && int(*n)+len(list.Items) > listWaste*len(idx) {
				r.stopListing(k, fmt.Sprintf("%d objects of the kind there, %d of them the release's", int(*n)+len(list.Items), len(idx)))
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
	r := objectResult{ID: id}
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
