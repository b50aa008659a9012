package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
)

// A grant variant: the `kubectl ql3 rbac` output with one verb of one rule
// removed (or nothing removed: the baseline).
type grantVariant struct {
	doc, rule int    // which Role/ClusterRole document and rule (in the shape)
	kind      string // Role or ClusterRole
	rule0     rbacv1.PolicyRule
	verb      string // the verb removed; "" = baseline
	desc      string
}

// rbacDoc is one document of the rbac output.
type rbacDoc struct {
	Kind     string              `json:"kind"`
	Metadata metav1.ObjectMeta   `json:"metadata"`
	Rules    []rbacv1.PolicyRule `json:"rules"`
}

// variants lists every (document, rule, verb) of the rbac output.
func variants(docs []rbacDoc, ns string) []grantVariant {
	out := []grantVariant{{doc: -1, desc: "nothing removed (baseline)"}}
	for d, doc := range docs {
		if doc.Kind != "Role" && doc.Kind != "ClusterRole" {
			continue
		}
		for r, rule := range doc.Rules {
			for _, v := range rule.Verbs {
				what := strings.Join(rule.Resources, ",")
				if len(rule.ResourceNames) > 0 {
					what += "/" + strings.ReplaceAll(strings.Join(rule.ResourceNames, ","), ns, "<control-ns>")
				} else {
					what += " (any name)"
				}
				scope := "cluster"
				if doc.Kind == "Role" {
					scope = "namespace"
				}
				out = append(out, grantVariant{doc: d, rule: r, kind: doc.Kind, rule0: rule, verb: v, desc: fmt.Sprintf("%s %s [%s rule %d]", v, what, scope, r+1)})
			}
		}
	}
	return out
}

// caseLeastPrivilege: for each verb of each rule `kubectl ql3 rbac` prints,
// remove it and run the ceremony as a user holding the rest: it either
// still succeeds (the verb is not needed for that transition) or fails
// closed — no workload write before the failure and the Head not moved by
// that user (audit log).
func caseLeastPrivilege(c *campaign, cs *caseState) []Row {
	row := Row{Case: "least privilege (one verb removed)", Expected: "each run succeeds (verb not needed) or fails closed: 0 workload writes and Head not moved by that user"}
	// The rbac output's shape, from a throwaway release.
	ns, err := c.namespace("rbac-shape")
	if err != nil {
		cs.failf("%v", err)
		return []Row{row}
	}
	dir, err := c.release("v3.1.0", ns, "")
	if err != nil {
		cs.failf("%v", err)
		return []Row{row}
	}
	docs, _, err := c.rbacDocs(dir, "nobody")
	if err != nil {
		cs.failf("rbac: %v", err)
		return []Row{row}
	}
	vs := variants(docs, ns)
	type job struct {
		v     grantVariant
		kind  string
		drift bool // removed after a preflight under the full grant, before apply
	}
	var jobs []job
	for _, v := range vs {
		for _, kind := range []string{deploy.TransitionInstall, deploy.TransitionUpgrade} {
			for _, drift := range []bool{false, true} {
				if (c.cfg.Quick && !quickVariant(v, kind, drift)) || (drift && v.verb == "") {
					continue
				}
				jobs = append(jobs, job{v, kind, drift})
			}
		}
	}
	row.Runs = len(jobs)
	var mu sync.Mutex
	outcomes := map[string][]string{} // outcome -> variants
	perVerb := map[string]string{}
	var closed, notNeeded, open atomic.Int64
	c.parallel(len(jobs), func(i int) {
		j := jobs[i]
		outcome, err := c.privilegeRun(j.v, j.kind, j.drift)
		mu.Lock()
		defer mu.Unlock()
		when := "before preflight"
		if j.drift {
			when = "after preflight"
		}
		key := fmt.Sprintf("%s, removed %s: %s", j.kind, when, j.v.desc)
		if err != nil {
			open.Add(1)
			cs.failf("%s: %v", key, err)
			perVerb[key] = "FAIL: " + err.Error()
			return
		}
		perVerb[key] = outcome
		switch {
		case strings.HasPrefix(outcome, "succeeded"):
			notNeeded.Add(1)
		default:
			closed.Add(1)
		}
		outcomes[outcome] = append(outcomes[outcome], key)
	})
	row.Observed = fmt.Sprintf("%d rule verbs × {install, upgrade} × {removed before preflight, between preflight and apply}, + 2 baselines: %d failed closed, %d succeeded (verb not needed), %d failed open",
		len(vs)-1, closed.Load(), notNeeded.Load(), open.Load())
	if c.cfg.Quick {
		row.Observed = fmt.Sprintf("%d runs: %d failed closed, %d not needed (succeeded), %d failed open", row.Runs, closed.Load(), notNeeded.Load(), open.Load())
	}
	row.Pass = open.Load() == 0
	row.Details = map[string]any{"perVerb": perVerb}
	return []Row{row}
}

// quickVariant picks the few removals `make test` runs: the Head's update
// on an install (the commit needs it), a workload's get (convergence
// reads), a patch, and the baseline.
func quickVariant(v grantVariant, kind string, drift bool) bool {
	switch {
	case v.verb == "":
		return true
	case kind == deploy.TransitionInstall && v.verb == "update" && strings.Contains(v.desc, deploy.HeadName):
		return true
	case kind == deploy.TransitionInstall && v.verb == "get" && strings.HasPrefix(v.desc, "get deployments/") && drift:
		return true
	case kind == deploy.TransitionUpgrade && v.verb == "patch" && strings.HasPrefix(v.desc, "patch widgets/") && drift:
		return true
	}
	return false
}

// rbacDocs runs `kubectl ql3 rbac DIR --bind-user user`.
func (c *campaign) rbacDocs(dir, user string) ([]rbacDoc, []string, error) {
	r := c.runBinary(c.cp.AdminKubeconfig, nil, "rbac", dir, "--bind-user", user)
	if r.code != 0 {
		return nil, nil, fmt.Errorf("exit %d: %s", r.code, r.stderr)
	}
	var docs []rbacDoc
	var raw []string
	for _, part := range strings.Split(r.stdout, "\n---\n") {
		var d rbacDoc
		if err := yaml.Unmarshal([]byte(part), &d); err != nil {
			return nil, nil, err
		}
		docs = append(docs, d)
		raw = append(raw, part)
	}
	return docs, raw, nil
}

// privilegeRun grants the variant to a fresh user and runs preflight and
// apply as that user; with drift the verb is removed only after a
// preflight under the full grant, so apply itself must catch it. The
// outcome says what happened; the error is a failure to fail closed.
func (c *campaign) privilegeRun(v grantVariant, kind string, drift bool) (string, error) {
	ns, err := c.namespace("priv")
	if err != nil {
		return "", err
	}
	rdir := filepath.Join(c.work, "receipts", ns)
	admin, err := c.adminOptions(rdir)
	if err != nil {
		return "", err
	}
	dir, err := c.release("v3.0.0", ns, "")
	if err != nil {
		return "", err
	}
	token := deploy.AbsentToken
	if kind == deploy.TransitionUpgrade {
		res, err := c.deploy(admin, dir, deploy.TransitionInstall, deploy.ExpectedHead{})
		if err != nil {
			return "", fmt.Errorf("admin install: %w", err)
		}
		token = res.Head.Expected().String()
		if dir, err = c.release("v3.1.0", ns, ""); err != nil {
			return "", err
		}
	}
	user, kc, err := c.user("deployer")
	if err != nil {
		return "", err
	}
	docs, raw, err := c.rbacDocs(dir, user)
	if err != nil {
		return "", err
	}
	full := slices.Clone(raw)
	var removed *access
	if v.doc >= 0 {
		// The same rule in this release's grant: by position when the
		// shape matches (it does: the releases have the same kinds), else
		// by content.
		di, ri := -1, -1
		same := func(r rbacv1.PolicyRule) bool {
			return slices.Equal(r.APIGroups, v.rule0.APIGroups) && slices.Equal(r.Resources, v.rule0.Resources) &&
				(len(r.ResourceNames) > 0) == (len(v.rule0.ResourceNames) > 0) && slices.Equal(r.Verbs, v.rule0.Verbs)
		}
		if v.doc < len(docs) && docs[v.doc].Kind == v.kind && v.rule < len(docs[v.doc].Rules) && same(docs[v.doc].Rules[v.rule]) {
			di, ri = v.doc, v.rule
		} else {
			for i, d := range docs {
				for j, r := range d.Rules {
					if d.Kind == v.kind && same(r) {
						di, ri = i, j
					}
				}
			}
		}
		if di < 0 {
			return "succeeded: no such rule for this release", nil
		}
		d := docs[di]
		rule := d.Rules[ri]
		removed = &access{verb: v.verb, group: rule.APIGroups[0], resource: rule.Resources[0], namespace: d.Metadata.Namespace}
		if len(rule.ResourceNames) > 0 {
			removed.name = rule.ResourceNames[0]
		}
		rule.Verbs = slices.DeleteFunc(slices.Clone(rule.Verbs), func(s string) bool { return s == v.verb })
		d.Rules = slices.Clone(d.Rules)
		if len(rule.Verbs) == 0 {
			d.Rules = slices.Delete(d.Rules, ri, ri+1)
		} else {
			d.Rules[ri] = rule
		}
		out, err := yaml.Marshal(map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": d.Kind, "metadata": d.Metadata, "rules": d.Rules})
		if err != nil {
			return "", err
		}
		raw[di] = string(out)
	}
	first := raw
	if drift {
		first = full
	}
	if err := c.kubectlApply(strings.Join(first, "\n---\n")); err != nil {
		return "", err
	}
	if err := c.waitGrant(user, ns); err != nil {
		return "", err
	}
	pf := filepath.Join(c.work, "preflights", ns+".json")
	pr := c.runBinary(kc, nil, "preflight", dir, "--transition", kind, "--expected-head", token, "--out", pf, "--timeout", "30s")
	if drift {
		if pr.code != 0 {
			return "", fmt.Errorf("preflight under the full grant: exit %d: %s", pr.code, pr.stderr)
		}
		if err := c.kubectlApply(strings.Join(raw, "\n---\n")); err != nil {
			return "", err
		}
		c.waitRevoked(user, *removed)
	}
	outcome := ""
	var ar procResult
	if pr.code != 0 {
		outcome = fmt.Sprintf("fails closed at preflight (exit %d)", pr.code)
	} else {
		ar = c.runBinary(kc, nil, "apply", "--preflight", pf, "--receipts-dir", rdir, "--timeout", "20s")
		if ar.code == 0 {
			outcome = "succeeded: not needed for " + kind
		} else {
			outcome = fmt.Sprintf("fails closed at apply (exit %d)", ar.code)
		}
	}
	evs, err := c.writes(user)
	if err != nil {
		return "", err
	}
	head, work := split(evs)
	failed := pr.code != 0 || ar.code != 0
	msg := pr.stderr
	if pr.code == 0 {
		msg = ar.stderr
	}
	if failed && (len(work) > 0 || len(head) > 0) {
		return "", fmt.Errorf("failed open: %d workload write(s) [%s] and %d Head write(s) before failing: %s",
			len(work), describeEvents(work), len(head), lastLine(msg))
	}
	if v.doc < 0 && failed {
		return "", fmt.Errorf("the full grant does not run the ceremony: %s%s", pr.stderr, ar.stderr)
	}
	if failed && errorLines(msg) != 1 {
		return "", fmt.Errorf("%d `error: ` lines: %s", errorLines(msg), msg)
	}
	return outcome, nil
}

func (c *campaign) kubectlApply(manifest string) error {
	cmd := exec.Command(filepath.Join(c.cp.BinDir, "kubectl"), "apply", "-f", "-")
	cmd.Stdin = strings.NewReader(manifest)
	cmd.Env = append(cleanEnv(), "KUBECONFIG="+c.cp.AdminKubeconfig)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("kubectl apply rbac: %v: %s", err, out)
	}
	return nil
}

// waitRevoked waits (bounded) until the authorizer denies the removed
// access; a verb another rule also grants stays allowed, and the run then
// shows that it was not needed.
func (c *campaign) waitRevoked(user string, a access) {
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		ra := authorizationv1.ResourceAttributes{Verb: a.verb, Group: a.group, Resource: a.resource, Namespace: a.namespace, Name: a.name}
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: &ra}}
		got, err := c.admin.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), sar, metav1.CreateOptions{})
		if err == nil && !got.Status.Allowed {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// access is one permission (as the rbac output grants it).
type access struct{ verb, group, resource, namespace, name string }

func lastLine(s string) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return l[len(l)-1]
}

// waitGrant waits until the RBAC authorizer sees the user's grant (its
// informers lag the write a little): the kube-system identity read, or, if
// that was removed, the Head's get.
func (c *campaign) waitGrant(user, ns string) error {
	checks := []authorizationv1.ResourceAttributes{
		{Verb: "get", Resource: "namespaces", Name: "kube-system"},
		{Verb: "get", Resource: "configmaps", Namespace: ns, Name: deploy.HeadName},
		{Verb: "get", Group: "apps", Resource: "deployments", Namespace: ns, Name: "ql3-control"},
	}
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		for _, ra := range checks {
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: &ra}}
			got, err := c.admin.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), sar, metav1.CreateOptions{})
			if err == nil && got.Status.Allowed {
				time.Sleep(200 * time.Millisecond) // the rest of the grant was written with it
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("the grant of %s never took effect", user)
}
