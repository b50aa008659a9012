package deploy_test

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
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

// Another client takes a field of the release after the preflight (as
// `kubectl apply --server-side --force-conflicts --field-manager other`
// does): apply, then resume, conflict (exit 3) with the Head applying,
// and the advice is one that works while it is applying — not "preflight
// again with --force-conflicts", which the applying Head refuses, and
// which resume has no flag for. Following its first way (the other
// client gives the field back), resume commits.
func TestApplyConflictAdviceWhileApplying(t *testing.T) {
	ns := targetNamespace(t)
	dir := release(t, "v3.0.0", ns, "")
	cl := cluster(t, userConfig(t, "alice", "system:masters"))
	o := options(t, cl, t.TempDir())
	pf := preflight(t, o, dir, deploy.TransitionInstall, deploy.ExpectedHead{})
	ctx := context.Background()
	if _, err := cl.Apply(ctx, otherConfig(ns, map[string]any{"log-level": "debug"}), "other", true, false); err != nil {
		t.Fatal(err)
	}
	checkAdvice := func(what string, err error) {
		t.Helper()
		if !fail.Is(err, fail.Conflict) {
			t.Fatalf("%s: %v (class %v), want conflict (3)", what, err, fail.ClassOf(err))
		}
		for _, want := range []string{`conflict with "other"`, ".data.log-level", "the Head stays applying generation 1",
			"kubectl ql3 resume --preflight FILE", "kubectl ql3 preflight DIR --supersede 1 --force-conflicts"} {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("%s: the error does not say %q:\n%v", what, want, err)
			}
		}
		if strings.Contains(err.Error(), "preflight again with --force-conflicts") {
			t.Fatalf("%s: advises a preflight the applying Head refuses:\n%v", what, err)
		}
		if h := headOf(t, ns); h.Phase != deploy.PhaseApplying || h.Generation != 1 {
			t.Fatalf("%s: Head %+v, want generation 1 applying", what, h)
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
	res, err := deploy.RunApply(ctx, o, deploy.ApplyRequest{Preflight: pf.Record, Resume: true})
	if err != nil || res.Outcome != "committed" {
		t.Fatalf("resume after the field was given back: %+v, %v; want committed", res, err)
	}
}
