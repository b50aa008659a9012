package deploy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/qinglong/kubectl-ql3/ceremony/cas"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory"
)

// Dry-run outcomes other than "ok": the object cannot be dry-run before the
// release itself creates its namespace or its CRD. Apply settles them.
const (
	dryRunOK               = "ok"
	dryRunDeferredNS       = "deferred: namespace created by this release"
	dryRunDeferredCRD      = "deferred: kind defined by a CRD in this release"
	crdGroup               = "apiextensions.k8s.io"
	establishedPollEvery   = 200 * time.Millisecond
	convergePollEvery      = 250 * time.Millisecond
	transientApplyAttempts = 5
)

func identityOf(u *unstructured.Unstructured) inventory.Identity {
	return inventory.Identity{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName()}
}

func isFirstStage(u *unstructured.Unstructured) bool {
	gvk := u.GroupVersionKind()
	return (gvk.Group == "" && gvk.Kind == "Namespace") || isCRD(u)
}

func isCRD(u *unstructured.Unstructured) bool {
	gvk := u.GroupVersionKind()
	return gvk.Group == crdGroup && gvk.Kind == "CustomResourceDefinition"
}

// stages splits objects into Namespaces and CRDs first, then the rest,
// keeping inventory order within each stage.
func stages(objs []*unstructured.Unstructured) [][]*unstructured.Unstructured {
	var first, rest []*unstructured.Unstructured
	for _, u := range objs {
		if isFirstStage(u) {
			first = append(first, u)
		} else {
			rest = append(rest, u)
		}
	}
	return [][]*unstructured.Unstructured{first, rest}
}

// controllerKinds are the kinds a controller acts on once they exist: in
// the second stage they are sent first, so that their controllers start
// while the leaf objects are applied.
var controllerKinds = map[string]bool{
	"apps/Deployment": true, "apps/StatefulSet": true, "apps/DaemonSet": true, "batch/Job": true,
}

func isControllerDriven(u *unstructured.Unstructured) bool {
	gvk := u.GroupVersionKind()
	return controllerKinds[gvk.Group+"/"+gvk.Kind]
}

// controllersFirst orders a stage: controller-driven kinds first, then the
// rest, each in inventory order.
func controllersFirst(stage []*unstructured.Unstructured) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, 0, len(stage))
	for _, u := range stage {
		if isControllerDriven(u) {
			out = append(out, u)
		}
	}
	for _, u := range stage {
		if !isControllerDriven(u) {
			out = append(out, u)
		}
	}
	return out
}

// objectResult is one object's outcome in a step.
type objectResult struct {
	ID         inventory.Identity `json:"id"`
	Result     string             `json:"result"`
	UID        string             `json:"uid,omitempty"`
	Generation int64              `json:"generation,omitempty"`
	err        error
	rv         string // the resourceVersion read (converge's watches start there)
}

// forEach runs fn over objs with at most n in flight and returns results in
// input order.
func forEach(ctx context.Context, n int, objs []*unstructured.Unstructured, fn func(context.Context, *unstructured.Unstructured) objectResult) []objectResult {
	out := make([]objectResult, len(objs))
	var g errgroup.Group
	g.SetLimit(n)
	for i, u := range objs {
		if ctx.Err() != nil {
			out[i] = objectResult{ID: identityOf(u), err: ctx.Err()}
			continue
		}
		g.Go(func() error {
			out[i] = fn(ctx, u) // each goroutine its own element
			return nil
		})
	}
	_ = g.Wait() // no goroutine returns an error: each object's is in its result
	return out
}

// applyOne server-side applies one object, retrying every unknown outcome
// (no answer — a lost response or a --request-timeout — or 408, 429, 5xx;
// cas.Unknown): SSA with one field manager is idempotent, so an outcome we
// cannot know is settled by applying again. A definite answer, or a local
// error (a kind the RESTMapper does not know, a marshal failure), is
// returned at once — unless it answers an apply sent to settle an earlier
// unanswered one: that outcome stays unknown (unavailable), as the
// refusal says nothing about it. When the command's own deadline has passed, the
// outcome stays unknown: unavailable, the Head stays applying, and a rerun
// settles it.
func (o *Options) applyOne(ctx context.Context, u *unstructured.Unstructured, fm string, force, dryRun bool) (*unstructured.Unstructured, error) {
	var (
		got       *unstructured.Unstructured
		err, last error
		attempt   int
	)
	// The pause before the next attempt is computed once the last one has
	// answered (sliding), from the attempt number and that answer.
	delay := wait.DelayFunc(func() time.Duration { return retryDelay(attempt, last) })
	waitErr := delay.Until(ctx, true, true, func(ctx context.Context) (bool, error) {
		start := time.Now()
		got, err = o.Cluster.Apply(ctx, u, fm, force, dryRun)
		if err == nil {
			return true, nil
		}
		if !cas.Unknown(err) {
			if attempt > 0 && !apierrors.IsConflict(err) {
				// A refusal of the apply that was to settle an earlier,
				// unanswered one (a credential expired in between, a
				// webhook now denies) says nothing about that one.
				err = fail.Errorf(fail.Unavailable, "the answer to the apply did not arrive (%v) and applying again to settle it was refused (%v): its outcome is unknown; restore access and rerun to settle it", last, cas.Classify(cas.OpApply, "apply", err))
			}
			return true, nil
		}
		last = err
		o.say("apply: %s: the answer did not arrive (after %s: %v); applying again (server-side apply is idempotent)", identityOf(u), time.Since(start).Round(time.Millisecond), err)
		attempt++
		if attempt == transientApplyAttempts || ctx.Err() != nil {
			err = fail.Errorf(fail.Unavailable, "the answer to the apply did not arrive (%w): its outcome is unknown; rerunning settles it (server-side apply is idempotent)", last)
			return true, nil
		}
		return false, nil
	})
	if waitErr != nil {
		return nil, waitErr // the command's context ended during a pause
	}
	if err != nil {
		return nil, err
	}
	return got, nil
}

// retryDelay is the pause before retry number attempt (1, 2, ...) after
// err: a growing backoff, and never less than the Retry-After the API
// server asked for (priority and fairness answers 429 with one; client-go
// has already honoured it for its own retries, so a 429 that reaches us
// means the server is still saturated: we do not hammer it).
func retryDelay(attempt int, err error) time.Duration {
	d := time.Duration(attempt*attempt) * 100 * time.Millisecond
	if s, ok := apierrors.SuggestsClientDelay(err); ok && time.Duration(s)*time.Second > d {
		d = time.Duration(s) * time.Second
	}
	return d
}

// dryRunAll is preflight step 4: a server-side dry-run of every object.
// With keep, it also returns each object as the dry-run answered it (nil
// for an object deferred until its namespace or CRD exists), aligned with
// objs, for preflight --diff.
func (o *Options) dryRunAll(ctx context.Context, objs []*unstructured.Unstructured, fm string, force bool, controlNS string, keep bool) (string, int, []*unstructured.Unstructured, error) {
	releaseNS := map[string]bool{}
	for _, u := range objs {
		if u.GetKind() == "Namespace" && u.GroupVersionKind().Group == "" {
			releaseNS[u.GetName()] = true
		}
	}
	releaseKinds := crdKinds(objs)
	var after []*unstructured.Unstructured
	var index map[*unstructured.Unstructured]int
	if keep {
		after = make([]*unstructured.Unstructured, len(objs))
		index = make(map[*unstructured.Unstructured]int, len(objs))
		for i, u := range objs {
			index[u] = i
		}
	}
	results := forEach(ctx, o.Parallelism, objs, func(ctx context.Context, u *unstructured.Unstructured) objectResult {
		r := objectResult{ID: identityOf(u), Result: dryRunOK}
		got, err := o.applyOne(ctx, u, fm, force, true)
		switch {
		case err == nil:
			if keep {
				after[index[u]] = got // each goroutine its own element
			}
		case meta.IsNoMatchError(err) && releaseKinds[u.GroupVersionKind().Group+"/"+u.GetKind()]:
			r.Result = dryRunDeferredCRD
		case apierrors.IsNotFound(err) && releaseNS[u.GetNamespace()] && isNamespaceNotFound(err):
			r.Result = dryRunDeferredNS
		default:
			r.err = err
		}
		return r
	})
	deferred := 0
	var errs []error
	for _, r := range results {
		if r.Result == dryRunDeferredNS && r.ID.Namespace == controlNS {
			return "", 0, nil, missingControlNamespace(controlNS)
		}
		if r.err != nil {
			o.say("dry-run: %s: %v", r.ID, r.err)
			errs = append(errs, fmt.Errorf("%s: %w", r.ID, r.err))
		} else if r.Result != dryRunOK {
			deferred++
		}
	}
	if len(errs) > 0 {
		return "", 0, nil, classifyObjects("dry-run", len(errs), len(objs), errs, "another field manager owns these fields: preflight again with --force-conflicts to take them over")
	}
	d, err := transcriptDigest("dry-run", results)
	return d, deferred, after, err
}

// crdKinds is the set of "group/Kind" the release's own CRDs define.
func crdKinds(objs []*unstructured.Unstructured) map[string]bool {
	kinds := map[string]bool{}
	for _, u := range objs {
		if isCRD(u) {
			group, _, _ := unstructured.NestedString(u.Object, "spec", "group")
			kind, _, _ := unstructured.NestedString(u.Object, "spec", "names", "kind")
			kinds[group+"/"+kind] = true
		}
	}
	return kinds
}

func isNamespaceNotFound(err error) bool {
	var st apierrors.APIStatus
	if errors.As(err, &st) && st.Status().Details != nil {
		return st.Status().Details.Kind == "namespaces"
	}
	return false
}

// classifyObjects turns per-object failures into one error of the class
// that decides what to do: a field-manager conflict (3) before invalid
// input (2: forbidden, rejected by validation or admission, a kind not
// served), before a local failure (1), before an unknown outcome (4).
// conflictHint is what to do about a conflict.
func classifyObjects(step string, failed, total int, errs []error, conflictHint string) error {
	class := cas.Decisive(cas.OpApply, step, errs)
	hint := ""
	switch class {
	case fail.Conflict:
		hint = " (" + conflictHint + ")"
	case fail.Unavailable:
		hint = " (their outcome is unknown; rerunning settles it)"
	}
	return fail.Errorf(class, "%s: %d of %d objects failed%s: %w", step, failed, total, hint, utilerrors.NewAggregate(errs))
}

// applyAll is apply step 4: server-side apply in stages, CRDs waited for
// until Established before anything that may use them; in the second
// stage controller-driven kinds are sent first. The convergence read
// (step 5) starts alongside: each object is read back once its apply has
// answered (converge.go), and converge finishes it. h is the applying
// Head, whose ways out the advice on a field-manager conflict names.
func (o *Options) applyAll(ctx context.Context, objs []*unstructured.Unstructured, fm string, force bool, h *Head) (_ []objectResult, err error) {
	var all []objectResult
	releaseKinds := crdKinds(objs)
	ids := make([]inventory.Identity, len(objs))
	for i, u := range objs {
		ids[i] = identityOf(u)
	}
	conv := o.newConvergence(ids)
	// The read-back started here ends with the apply: on success after its
	// read in flight (which converge would send again; cancelling it
	// mid-body only makes client-go log the cancellation on stderr), on
	// failure at once.
	watchCtx, cancelWatch := context.WithCancel(ctx)
	stop, watched := make(chan struct{}), make(chan struct{})
	go func() { defer close(watched); conv.watch(watchCtx, stop) }()
	defer func() {
		if err != nil {
			cancelWatch()
		}
		close(stop)
		<-watched
		cancelWatch()
		if err != nil {
			conv.p.finish()
			return
		}
		o.conv = conv
	}()
	for i, stage := range stages(objs) {
		if len(stage) == 0 {
			continue
		}
		if i == 1 {
			stage = controllersFirst(stage)
		}
		o.say("apply: stage %d: %d object(s)", i+1, len(stage))
		results := forEach(ctx, o.Parallelism, stage, func(ctx context.Context, u *unstructured.Unstructured) objectResult {
			r := objectResult{ID: identityOf(u), Result: "applied"}
			var got *unstructured.Unstructured
			var err error
			if releaseKinds[u.GroupVersionKind().Group+"/"+u.GetKind()] {
				got, err = o.applyServed(ctx, u, fm, force)
			} else {
				got, err = o.applyOne(ctx, u, fm, force, false)
			}
			if err != nil {
				r.err = err
				return r
			}
			// Only the identity, UID and generation are kept: the response
			// bodies of N objects are not held until the convergence read.
			r.UID, r.Generation = string(got.GetUID()), got.GetGeneration()
			conv.add(r.ID)
			return r
		})
		var errs []error
		for _, r := range results {
			if r.err != nil {
				o.say("apply: %s: %v", r.ID, r.err)
				errs = append(errs, fmt.Errorf("%s: %w", r.ID, r.err))
			}
		}
		if len(errs) > 0 {
			return nil, classifyObjects("apply", len(errs), len(stage), errs, applyConflictAdvice(h))
		}
		all = append(all, results...)
		if i == 0 && slices.ContainsFunc(stage, isCRD) {
			if err := o.waitEstablished(ctx, results); err != nil {
				return nil, err
			}
			// Discovery is read again only when this release added kinds.
			o.Cluster.ResetMapper()
		}
	}
	slices.SortFunc(all, func(a, b objectResult) int { return inventory.Compare(a.ID, b.ID) })
	return all, nil
}

// applyConflictAdvice is what to do when another field manager took fields
// of the release after the preflight, with the Head h applying: a new
// preflight is refused while it is applying, and resume only continues the
// same intent (no --force-conflicts); only a transition that supersedes an
// upgrade or a rollback can take the fields over.
func applyConflictAdvice(h *Head) string {
	return "another field manager took these fields after the preflight; " +
		waysOut(h, "have that client give them back (or put back the release's values)", "take them over, leaving", " --force-conflicts")
}

// applyServed applies an object whose kind this release's own CRD defines.
// An Established CRD is not yet served everywhere at once: an API server
// that has just started (or one of several behind a load balancer) builds
// its discovery and CRD handlers from storage a moment later. Until then
// the kind is missing from discovery (no match) or its path answers 404,
// both of which mean "not yet", not "wrong": discovery is read again and
// the apply retried until --timeout, which then fails as unavailable
// (exit 4; a rerun of apply settles it).
func (o *Options) applyServed(ctx context.Context, u *unstructured.Unstructured, fm string, force bool) (*unstructured.Unstructured, error) {
	deadline := time.Now().Add(o.Timeout)
	var got *unstructured.Unstructured
	var err error
	pollErr := wait.PollUntilContextCancel(ctx, establishedPollEvery, true, func(ctx context.Context) (bool, error) {
		got, err = o.applyOne(ctx, u, fm, force, false)
		notServed := meta.IsNoMatchError(err) || (apierrors.IsNotFound(err) && !isNamespaceNotFound(err))
		if !notServed {
			return true, nil
		}
		if time.Now().After(deadline) {
			return false, fail.Errorf(fail.Unavailable, "kind %s of this release's CRD is Established but not served within %s: %w", u.GroupVersionKind(), o.Timeout, err)
		}
		o.Cluster.ResetMapper() // discovery is read again by the next apply
		return false, nil
	})
	if pollErr != nil {
		return nil, pollErr
	}
	return got, err
}

func (o *Options) waitEstablished(ctx context.Context, results []objectResult) error {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	for _, r := range results {
		if r.ID.Kind != "CustomResourceDefinition" {
			continue
		}
		var err error
		if wait.PollUntilContextCancel(ctx, establishedPollEvery, true, func(ctx context.Context) (bool, error) {
			var u *unstructured.Unstructured
			u, err = o.Cluster.Get(ctx, r.ID)
			return err == nil && crdEstablished(u), nil
		}) != nil {
			return fail.Errorf(fail.Unavailable, "apply: CRD %s not Established within %s: %v", r.ID.Name, o.Timeout, err)
		}
	}
	return nil
}

func crdEstablished(u *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// missingControlNamespace: the Head lives in the control namespace, so it
// must exist before the first deployment (and before its deployer Role).
func missingControlNamespace(ns string) error {
	return fail.Errorf(fail.Invalid, "control namespace %q does not exist: create it first (kubectl create namespace %s), then bind the deployer's Role there (kubectl ql3 rbac); the Head lives in it", ns, ns)
}
