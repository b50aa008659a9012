package deploy_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/ceremony/views"
	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// otherConfig is the release's ConfigMap ql3-config in ns as another field
// manager applies it: data, and nothing else.
func otherConfig(ns string, data map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "ql3-config", "namespace": ns},
	}}
	if data != nil {
		u.Object["data"] = data
	}
	return u
}

// Another client takes a field of the release after the preflight of an
// upgrade (as `kubectl apply --server-side --force-conflicts
// --field-manager other` does): apply, then resume, conflict (exit 3) with
// the Head applying generation 2, and the advice is one that works while
// it is applying — not "preflight again with --force-conflicts", which the
// applying Head refuses, and which resume has no flag for, but a resume
// once the field is given back, or a preflight that supersedes generation
// 2 with --force-conflicts. Following the first way, resume commits.
func TestApplyConflictAdviceWhileApplying(t *testing.T) {
	ns := targetNamespace(t)
	cl := cluster(t, userConfig(t, "alice", "system:masters"))
	o := options(t, cl, t.TempDir())
	res := deployRelease(t, o, release(t, "v3.0.0", ns, ""), deploy.TransitionInstall, deploy.ExpectedHead{})
	pf := preflight(t, o, release(t, "v3.1.0", ns, ""), deploy.TransitionUpgrade, res.Head.Expected())
	ctx := context.Background()
	if _, err := cl.Apply(ctx, otherConfig(ns, map[string]any{"log-level": "debug"}), "other", true, false); err != nil {
		t.Fatal(err)
	}
	checkAdvice := func(what string, err error) {
		t.Helper()
		if !fail.Is(err, fail.Conflict) {
			t.Fatalf("%s: %v (class %v), want conflict (3)", what, err, fail.ClassOf(err))
		}
		h := headOf(t, ns)
		for _, want := range []string{`conflict with "other"`, ".data.log-level", "the Head stays applying generation 2",
			"kubectl ql3 resume --preflight FILE",
			"kubectl ql3 preflight DIR --transition upgrade --supersede 2 --expected-head " + h.Expected().String() + " --force-conflicts",
			"kubectl ql3 preflight DIR --transition rollback --supersede 2 --expected-head " + h.Expected().String() + " --force-conflicts"} {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("%s: the error does not say %q:\n%v", what, want, err)
			}
		}
		if strings.Contains(err.Error(), "preflight again with --force-conflicts") {
			t.Fatalf("%s: advises a preflight the applying Head refuses:\n%v", what, err)
		}
		if h.Phase != deploy.PhaseApplying || h.Generation != 2 {
			t.Fatalf("%s: Head %+v, want generation 2 applying", what, h)
		}
	}
	_, err := deploy.RunApply(ctx, o, deploy.ApplyRequest{Preflight: pf.Record})
	checkAdvice("apply", err)
	_, err = deploy.RunApply(ctx, o, deploy.ApplyRequest{Preflight: pf.Record, Resume: true})
	checkAdvice("resume", err)

	// The other client gives the field back: it applies none of it.
	if _, err := cl.Apply(ctx, otherConfig(ns, nil), "other", false, false); err != nil {
		t.Fatal(err)
	}
	res, err = deploy.RunApply(ctx, o, deploy.ApplyRequest{Preflight: pf.Record, Resume: true})
	if err != nil || res.Outcome != "committed" {
		t.Fatalf("resume after the field was given back: %+v, %v; want committed", res, err)
	}
}

// configState is status's row of ConfigMap ql3-config.
func configState(t *testing.T, rep *views.StatusReport) views.ObjectStatus {
	t.Helper()
	for _, o := range rep.Objects {
		if o.Object.Kind == "ConfigMap" && o.Object.Name == "ql3-config" {
			return o
		}
	}
	t.Fatalf("no ql3-config in the status report: %+v", rep.Objects)
	return views.ObjectStatus{}
}

// status shows what the next preflight will hit (#25 §2c). Another manager
// applies a field of the release with --force-conflicts (as `kubectl apply
// --server-side --force-conflicts --field-manager other`): with the
// deployed value it co-owns the field, and status, which used to say
// in-sync, reports ql3-config co-owned (exit 3); a preflight of a release
// that changes the value then conflicts on it. With another value it owns
// the field alone: status reports drift, and a preflight of a release that
// keeps the deployed value conflicts on it too.
func TestStatusShowsWhatTheNextPreflightHits(t *testing.T) {
	ns := targetNamespace(t)
	cl := cluster(t, userConfig(t, "alice", "system:masters"))
	o := options(t, cl, t.TempDir())
	res := deployRelease(t, o, release(t, "v3.0.0", ns, ""), deploy.TransitionInstall, deploy.ExpectedHead{})
	exp := res.Head.Expected()
	ctx := context.Background()
	conflicts := func(dir string) {
		t.Helper()
		_, err := deploy.RunPreflight(ctx, o, deploy.PreflightRequest{Dir: dir, Transition: deploy.TransitionUpgrade, Expected: exp,
			Out: filepath.Join(t.TempDir(), "pf.json")})
		if !fail.Is(err, fail.Conflict) || !strings.Contains(err.Error(), `conflict with "other"`) || !strings.Contains(err.Error(), ".data.log-level") {
			t.Fatalf("preflight: %v (class %v), want a conflict with \"other\" on .data.log-level", err, fail.ClassOf(err))
		}
	}

	if _, err := cl.Apply(ctx, otherConfig(ns, map[string]any{"log-level": "info"}), "other", true, false); err != nil {
		t.Fatal(err)
	}
	rep, err := views.Status(ctx, cl, ns, 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := configState(t, rep)
	if st.State != views.StateCoOwned || len(st.CoOwned) != 1 || st.CoOwned[0].Field != ".data.log-level" || st.CoOwned[0].Manager != "other" || st.CoOwned[0].Operation != "Apply" {
		t.Fatalf("ql3-config after another manager applied the same value: %+v", st)
	}
	if err := rep.Err(); rep.InSync || rep.CoOwned != 1 || !fail.Is(err, fail.Conflict) || !strings.Contains(err.Error(), "co-owned") {
		t.Fatalf("status: inSync %v, coOwned %d, %v; want not in sync, 1 co-owned, conflict", rep.InSync, rep.CoOwned, err)
	}
	debug := release(t, "v3.1.0", ns, "")
	editReleaseFile(t, debug, "config.yaml", "3.1.0", func(c string) string {
		return strings.Replace(c, "log-level: info", "log-level: debug", 1)
	})
	conflicts(debug)

	if _, err := cl.Apply(ctx, otherConfig(ns, map[string]any{"log-level": "trace"}), "other", true, false); err != nil {
		t.Fatal(err)
	}
	if rep, err = views.Status(ctx, cl, ns, 4, nil); err != nil {
		t.Fatal(err)
	}
	st = configState(t, rep)
	if st.State != views.StateDrifted || len(st.Drift) != 1 || st.Drift[0].Field != ".data.log-level" || st.Drift[0].Manager != "other" || len(st.CoOwned) != 0 {
		t.Fatalf("ql3-config after another manager took the field: %+v", st)
	}
	if !fail.Is(rep.Err(), fail.Conflict) {
		t.Fatalf("status: %v, want conflict", rep.Err())
	}
	conflicts(release(t, "v3.1.0", ns, ""))
}
