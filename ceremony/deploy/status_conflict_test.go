package deploy_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/ceremony/views"
	"github.com/qinglong/kubectl-ql3/internal/fail"
)

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
