package plugin_test

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qinglong/kubectl-ql3/ceremony/package/intent"
	"github.com/qinglong/kubectl-ql3/internal/testcluster"
)

// pkgRBACUser applies `package rbac --intent f` (less the verb drop),
// bound to a fresh user of ns, with kubectl, and returns the user and the
// environment that runs the binary as it.
func pkgRBACUser(t *testing.T, ns, f, name, drop string) (string, []string) {
	t.Helper()
	user := name + "-" + ns
	applyRBACList(t, mustRun(t, nil, "package", "rbac", "--intent", f, "--bind-user", user, "-o", "json"), drop)
	kc, err := cp.Kubeconfig(user)
	if err != nil {
		t.Fatal(err)
	}
	return user, []string{"KUBECONFIG=" + kc}
}

// Issue #14 through the binary: a user holding the `package rbac` output
// less one verb (create, update or get) fails closed: activate exits 2
// naming what it lacks and package rbac; the audit log holds no write by
// that user (yet requests by it: it did run as that user); the pointer is
// absent (create) or untouched (update).
func TestPackageCLIRBACLessOneVerb(t *testing.T) {
	for _, drop := range []string{"create", "update", "get"} {
		t.Run(drop, func(t *testing.T) {
			ns := cp.Namespace(t)
			dir := t.TempDir()
			s, _, key := pkgStage(t, dir, "5.0.0")
			f, in := pkgIntentFile(t, dir, s, ns, 1, "")
			nm, _ := intent.NamingOf(in)
			cms := cp.Clientset().CoreV1().ConfigMaps(ns)
			ctx := context.Background()
			args := append([]string{"package", "activate", "--intent", f}, stageArgs(s, key)...)
			rv := ""
			if drop == "update" {
				// Generation 1 active (by the admin); the user's is 2.
				mustRun(t, nil, args...)
				cm, err := cms.Get(ctx, nm.Name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				rv = cm.ResourceVersion
				s2, _, _ := pkgStage(t, dir, "5.0.1")
				f2, _ := pkgIntentFile(t, dir, s2, ns, 2, s.Evidence.LockDigest)
				args = append([]string{"package", "activate", "--intent", f2}, stageArgs(s2, key)...)
			}
			user, env := pkgRBACUser(t, ns, f, "pkg-no-"+drop, drop)
			_, stderr, code := run(t, env, args...)
			if code != 2 || !strings.Contains(stderr, "lacks") || !strings.Contains(stderr, "package rbac") || !strings.Contains(stderr, drop) {
				t.Fatalf("activate without %s: exit %d, want 2 naming what is missing\n%s", drop, code, stderr)
			}
			evs, err := cp.Writes(func(e testcluster.AuditEvent) bool { return e.User.Username == user })
			if err != nil || len(evs) != 0 {
				t.Fatalf("audit log: writes by the user without %s: %+v %v", drop, evs, err)
			}
			if len(auditedBy(t, user)) == 0 {
				t.Fatalf("audit log holds no request by %s: the check above proves nothing", user)
			}
			cm, err := cms.Get(ctx, nm.Name, metav1.GetOptions{})
			switch {
			case rv == "" && !apierrors.IsNotFound(err):
				t.Fatalf("the pointer exists after a refused activate: %v", err)
			case rv != "" && (err != nil || cm.ResourceVersion != rv):
				t.Fatalf("the pointer was touched: %v", err)
			}
		})
	}
}

// Issue #14 through the binary: the publisher holding exactly the
// `package rbac` output activates (create, replay, update) and inspects;
// the audit log (reads included) holds gets of the pointer by it and no
// list or watch by it at all, and exactly one create and one update.
func TestPackageCLINoListWatchAudited(t *testing.T) {
	ns := cp.Namespace(t)
	dir := t.TempDir()
	s, _, key := pkgStage(t, dir, "6.0.0")
	f, in := pkgIntentFile(t, dir, s, ns, 1, "")
	nm, _ := intent.NamingOf(in)
	user, env := pkgRBACUser(t, ns, f, "pkg-publisher", "")
	s2, _, _ := pkgStage(t, dir, "6.0.1")
	f2, _ := pkgIntentFile(t, dir, s2, ns, 2, s.Evidence.LockDigest)
	a1 := append([]string{"--intent", f}, stageArgs(s, key)...)
	a2 := append([]string{"--intent", f2}, stageArgs(s2, key)...)
	for _, c := range []struct {
		args []string
		want string
	}{
		{append([]string{"package", "inspect"}, a1...), ": not-activated"},
		{append([]string{"package", "activate"}, a1...), ": created"},
		{append([]string{"package", "activate"}, a1...), ": replayed"},
		{append([]string{"package", "inspect"}, a1...), ": active"},
		{append([]string{"package", "activate"}, a2...), ": updated"},
		{append([]string{"package", "inspect"}, a2...), ": active"},
	} {
		if out := mustRun(t, env, c.args...); !strings.Contains(out, c.want) {
			t.Fatalf("%s: %q, want %q", strings.Join(c.args[:2], " "), out, c.want)
		}
	}
	lw, err := cp.Reads(func(e testcluster.AuditEvent) bool {
		return e.User.Username == user && (e.Verb == "list" || e.Verb == "watch")
	})
	if err != nil || len(lw) != 0 {
		t.Fatalf("audit log: list or watch by the publisher: %+v %v", lw, err)
	}
	gets, err := cp.Reads(func(e testcluster.AuditEvent) bool {
		return e.User.Username == user && e.Verb == "get" && e.ObjectRef.Resource == "configmaps" && e.ObjectRef.Name == nm.Name
	})
	if err != nil || len(gets) < 4 {
		t.Fatalf("audit log: %d gets of the pointer by the publisher, want at least 4 (one per command that reads it): %v", len(gets), err)
	}
	if got := strings.Join(okWrites(t, user, ns), ","); got != "create configmaps/,update configmaps/"+nm.Name &&
		got != "create configmaps/"+nm.Name+",update configmaps/"+nm.Name {
		t.Fatalf("audited writes by the publisher %q, want one create and one update of the pointer", got)
	}
}
