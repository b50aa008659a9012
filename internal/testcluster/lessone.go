package testcluster

import (
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// Least privilege, proven: each ceremony's rbac command prints roles and
// bindings; a test creates them as printed (GrantAll), or less one verb
// (Grant, DropVerb), and checks that the command then fails closed
// (FailsClosedLessOne).

// Grant creates objs (GrantAll) less the verb drop in every rule of their
// roles (DropVerb); drop "" grants them as printed. A drop that no rule
// grants fails the test: it would prove nothing. objs are modified.
func (cp *ControlPlane) Grant(t testing.TB, objs []any, drop string) {
	t.Helper()
	if drop != "" && DropVerb(objs, drop, nil) == 0 {
		t.Fatalf("no rule of the printed roles grants %q: the test would prove nothing", drop)
	}
	cp.GrantAll(t, objs)
}

// DropVerb removes verb from every rule of the Roles and ClusterRoles in
// objs that match (nil: every rule), then the rules left with no verb,
// and returns how many rules lost it. objs are modified.
func DropVerb(objs []any, verb string, match func(rbacv1.PolicyRule) bool) int {
	n := 0
	for _, obj := range objs {
		var rules *[]rbacv1.PolicyRule
		switch o := obj.(type) {
		case *rbacv1.Role:
			rules = &o.Rules
		case *rbacv1.ClusterRole:
			rules = &o.Rules
		default:
			continue
		}
		for i, r := range *rules {
			if (match == nil || match(r)) && slices.Contains(r.Verbs, verb) {
				(*rules)[i].Verbs = slices.DeleteFunc(slices.Clone(r.Verbs), func(v string) bool { return v == verb })
				n++
			}
		}
		*rules = slices.DeleteFunc(*rules, func(r rbacv1.PolicyRule) bool { return len(r.Verbs) == 0 })
	}
	return n
}

// LessOne is a row of a least-privilege table: the printed grant less
// Verb, under which the command must fail closed, naming Missing (a part
// of the missing permission as access.Access prints it). Existing: the
// command's object is written first, by the admin, so that the command
// takes its update path.
type LessOne struct {
	Verb, Missing string
	Existing      bool
}

// FailsClosedLessOne runs a subtest "without VERB" a row, each in a new
// namespace: grant gives the user "no-VERB" the printed least privilege
// less the row's verb; try runs the command as that user and must return
// an invalid error naming row.Missing and saying that nothing was written;
// and the audit log must hold no write by that user in the namespace.
func (cp *ControlPlane) FailsClosedLessOne(t *testing.T, rows []LessOne, grant func(t *testing.T, ns, user, drop string), try func(t *testing.T, ns, user string, row LessOne) error) {
	t.Helper()
	for _, row := range rows {
		t.Run("without "+row.Verb, func(t *testing.T) {
			ns, user := cp.Namespace(t), "no-"+row.Verb
			grant(t, ns, user, row.Verb)
			err := try(t, ns, user, row)
			if !fail.Is(err, fail.Invalid) || !strings.Contains(err.Error(), row.Missing) || !strings.Contains(err.Error(), "nothing was written") {
				t.Fatalf("without %s: %v, want invalid input listing %q, nothing written", row.Verb, err, row.Missing)
			}
			for _, e := range cp.WritesBy(t, user, ns) {
				t.Errorf("without %s, %s sent %s %s/%s: the refusal was not before every write", row.Verb, user, e.Verb, e.ObjectRef.Resource, e.ObjectRef.Name)
			}
		})
	}
}
