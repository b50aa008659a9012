package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
)

// retiredObject is one object the retire deletes: its resource and name in
// the run's namespace.
type retiredObject struct{ resource, name string }

// retiredObjects are what 3.2.0 drops from the base release.
var retiredObjects = []retiredObject{{"configmaps", "ql3-features"}, {"deployments", "ql3-batch"}}

// retireReleases are the base release (v3.1.0 plus the ql3-batch
// Deployment, version 3.1.0) and the retiring one (v3.1.0 without the
// ql3-features ConfigMap, version 3.2.0), both for namespace ns: a retire
// from the first to the second deletes both retiredObjects.
func (c *campaign) retireReleases(ns string) (base, retired string, err error) {
	if base, err = c.release("v3.1.0", ns, ""); err != nil {
		return "", "", err
	}
	// testdata/retire/batch.yaml: the ql3-batch Deployment.
	batch, err := os.ReadFile(filepath.Join(c.cfg.Root, "testdata", "retire", "batch.yaml"))
	if err != nil {
		return "", "", err
	}
	if err := os.WriteFile(filepath.Join(base, "batch.yaml"), batch, 0o644); err != nil {
		return "", "", err
	}
	if err := editKustomization(base, "- worker.yaml\n", "- worker.yaml\n- batch.yaml\n"); err != nil {
		return "", "", err
	}
	if err := c.lock(base, "3.1.0"); err != nil {
		return "", "", err
	}
	if retired, err = c.release("v3.1.0", ns, "3.2.0"); err != nil {
		return "", "", err
	}
	if err := editKustomization(retired, "- features.yaml\n", ""); err != nil {
		return "", "", err
	}
	return base, retired, c.lock(retired, "3.2.0")
}

// editKustomization replaces old (which must occur) in dir's
// kustomization.yaml.
func editKustomization(dir, old, repl string) error {
	p := filepath.Join(dir, "kustomization.yaml")
	data, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	if !strings.Contains(string(data), old) {
		return fmt.Errorf("%s: no %q to replace (the fixture changed)", p, old)
	}
	return os.WriteFile(p, []byte(strings.Replace(string(data), old, repl, 1)), 0o644)
}

// retireSetup installs the base release in a fresh namespace as the admin
// and writes the retire's preflight.
func (c *campaign) retireSetup(prefix string) (ns, rdir string, pf *deploy.PreflightResult, err error) {
	if ns, err = c.namespace(prefix); err != nil {
		return "", "", nil, err
	}
	rdir = filepath.Join(c.work, "receipts", ns)
	admin, err := c.adminOptions(rdir)
	if err != nil {
		return "", "", nil, err
	}
	base, retired, err := c.retireReleases(ns)
	if err != nil {
		return "", "", nil, err
	}
	if _, err := c.deploy(admin, base, deploy.TransitionInstall, deploy.ExpectedHead{}); err != nil {
		return "", "", nil, fmt.Errorf("install of the base release: %w", err)
	}
	h, err := c.head(ns)
	if err != nil {
		return "", "", nil, err
	}
	if pf, err = c.preflight(admin, retired, deploy.TransitionRetire, h.Expected()); err != nil {
		return "", "", nil, fmt.Errorf("retire preflight: %w", err)
	}
	if len(pf.Record.Retired) != len(retiredObjects) {
		return "", "", nil, fmt.Errorf("the retire preflight lists %d retired objects, want %d", len(pf.Record.Retired), len(retiredObjects))
	}
	return ns, rdir, pf, nil
}

// checkRetired is the retire's end state beyond checkConverged: every
// retired object is gone, and by the API server's audit log each was
// deleted (2xx, not a dry run) exactly once by anyone. A resent fenced
// delete after the object is gone answers 404 and is not counted.
func (c *campaign) checkRetired(ns string) error {
	ctx := context.Background()
	for _, o := range retiredObjects {
		var err error
		switch o.resource {
		case "configmaps":
			_, err = c.admin.CoreV1().ConfigMaps(ns).Get(ctx, o.name, metav1.GetOptions{})
		default:
			_, err = c.admin.AppsV1().Deployments(ns).Get(ctx, o.name, metav1.GetOptions{})
		}
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("retired %s/%s is still readable after the retire committed (%v)", o.resource, o.name, err)
		}
	}
	n, unknown, err := c.deletes(ns)
	if err != nil {
		return err
	}
	for _, o := range retiredObjects {
		if !deletedOnce(n[o], unknown[o]) {
			return fmt.Errorf("the audit log shows %d successful deletes of %s/%s/%s (and %d whose answer was a 5xx), want exactly 1", n[o], o.resource, ns, o.name, unknown[o])
		}
	}
	return nil
}

// deletedOnce judges an object that is gone by the audit log's deletes of
// it: exactly one answered 2xx; or none did and at least one was answered
// 5xx, whose outcome is unknown. A client killed while its DELETE is in
// flight makes kube-apiserver log 504 even when etcd committed the delete
// (seen in a quick run: the GC removed the Deployment's ReplicaSet 17 ms
// after that 504, and the recovery's fenced delete got 404). The object
// has no owner and is gone, so then exactly one of those took effect.
func deletedOnce(ok, unknown int) bool { return ok == 1 || ok == 0 && unknown > 0 }

// deletes counts the non-dry-run deletes of the retired objects in ns, by
// any user, from the audit log: those answered 2xx, and those answered 5xx
// (outcome unknown).
func (c *campaign) deletes(ns string) (ok, unknown map[retiredObject]int, err error) {
	a := c.audit
	a.mu.Lock()
	defer a.mu.Unlock()
	var last int
	for i := 0; i < 5; i++ {
		if err := a.refresh(); err != nil {
			return nil, nil, err
		}
		if i > 0 && len(a.events) == last {
			break
		}
		last = len(a.events)
		time.Sleep(150 * time.Millisecond)
	}
	ok, unknown = map[retiredObject]int{}, map[retiredObject]int{}
	for _, e := range a.events {
		if e.Stage != "ResponseComplete" || e.Verb != "delete" || e.DryRun() || e.ObjectRef.Namespace != ns {
			continue
		}
		o := retiredObject{e.ObjectRef.Resource, e.ObjectRef.Name}
		switch code := e.ResponseStatus.Code; {
		case code >= 200 && code < 300:
			ok[o]++
		case code >= 500:
			unknown[o]++
		}
	}
	return ok, unknown, nil
}

// retireDelete matches the fenced (not dry-run) DELETE of one retired
// object.
func retireDelete(o retiredObject) func(ns string) func(*http.Request, []byte) bool {
	return func(ns string) func(*http.Request, []byte) bool {
		suffix := "/namespaces/" + ns + "/" + o.resource + "/" + o.name
		return func(r *http.Request, _ []byte) bool {
			return r.Method == http.MethodDelete && strings.HasSuffix(r.URL.Path, suffix)
		}
	}
}

// retirePoints are the mutations of a retire: the Head acquire, each
// fenced delete, and the Head commit.
func retirePoints() []point {
	pts := []point{{name: "head acquire (retire)", match: headWrite(http.MethodPut, "applying")}}
	for _, o := range retiredObjects {
		pts = append(pts, point{name: fmt.Sprintf("delete %s/%s (retire)", o.resource, o.name), match: retireDelete(o)})
	}
	return append(pts, point{name: "head commit (retire)", match: headWrite(http.MethodPut, "committed")})
}

// retirePlan is a lost-response plan on a retire.
func retirePlan(p point, times int32) faultPlan {
	f := onePoint(p, times)
	f.retire = true
	return f
}

// quickRetireDelete is the retire plan the quick campaign runs (lost and
// held): the fenced delete of the Deployment.
const quickRetireDelete = "delete deployments/ql3-batch (retire)"

// The retire's timed kills: during the applies before the deletes, and
// during the deletes (a slow client stretches them).
var retireKills = []timedKill{
	{"apply: acquired", 1500 * time.Millisecond},
	{"server-side applied", 600 * time.Millisecond},
	{"retire: ", 300 * time.Millisecond},
}

// caseCrashRetire is the crash row's retire half: SIGKILL at the
// "retired" crash point and timed kills during the deletes, then resume
// (or apply) until it converges to the retire's generation.
func caseCrashRetire(c *campaign, cs *caseState) Row {
	row := Row{Case: "crashes during retire (SIGKILL)", Expected: "every killed retire converges by resume/apply to generation 2 committed; receipts audit as one chain; each retired object deleted exactly once (audit log)"}
	want := c.runs(30, 2)
	var killed, converged, notKilled, resumed atomic.Int64
	stats := &crashStats{moments: map[string]int{}, how: map[string]int{}}
	c.parallel(want*2, func(i int) {
		if killed.Load() >= int64(want) {
			return
		}
		k, r, err := c.crashRetireRun(i, cs.rng(10_000_000+i), stats)
		if r {
			resumed.Add(1)
		}
		if !k {
			notKilled.Add(1)
		} else {
			killed.Add(1)
		}
		if err != nil {
			cs.failf("retire run %d: %v [replay: -seed %d -case crash]", i, err, cs.seed)
			return
		}
		if k {
			converged.Add(1)
		}
	})
	row.Runs = int(killed.Load())
	row.Observed = fmt.Sprintf("%d/%d killed retires converged (%d by resume; %d timed kills came after the end, not counted); every retired object deleted exactly once",
		converged.Load(), row.Runs, resumed.Load(), notKilled.Load())
	row.Pass = row.Runs >= want && converged.Load() == int64(row.Runs)
	if row.Runs < want {
		cs.failf("only %d of the %d wanted retire runs were killed", row.Runs, want)
	}
	row.Details = map[string]any{"killedAt": stats.moments, "killedBy": stats.how}
	return row
}

// crashRetireRun is one killed retire: run 0 dies at the "retired" crash
// point, the rest draw it (one in four) or a timed kill.
func (c *campaign) crashRetireRun(i int, rng *rand.Rand, stats *crashStats) (killed, resumed bool, err error) {
	ns, rdir, pf, err := c.retireSetup("crash-retire")
	if err != nil {
		return false, false, err
	}
	var env []string
	var tk *timedKill
	if i == 0 || rng.IntN(4) == 0 {
		env = []string{"QL3_CRASH_AT=retired"}
	} else {
		t := retireKills[rng.IntN(len(retireKills))]
		tk = &t
	}
	slow := []string{"--parallelism", fmt.Sprint(1 + rng.IntN(2)), "--qps", fmt.Sprint(5 + rng.IntN(15)), "--burst", "1"}
	_, kc, err := c.user("crasher", "system:masters")
	if err != nil {
		return false, false, err
	}
	res, err := c.killAt(kc, env, tk, rng, append([]string{"apply", "--preflight", pf.Path, "--receipts-dir", rdir}, slow...)...)
	if err != nil {
		return false, false, err
	}
	if !res.killed {
		if res.code != 0 {
			return false, false, fmt.Errorf("retire was not killed but exited %d: %s", res.code, res.stderr)
		}
		if len(env) > 0 {
			return false, false, fmt.Errorf("%s: the crash hook did not fire", env[0])
		}
		return false, false, nil
	}
	what := "timed kill"
	if len(env) > 0 {
		what = "retired"
	}
	stats.add(moment(res.stderr), what)
	h, err := c.head(ns)
	if err != nil {
		return true, false, err
	}
	verb := "apply"
	if h != nil && h.Phase == deploy.PhaseApplying && h.Transition.PreflightDigest == pf.Record.SelfDigest {
		verb, resumed = "resume", true
	}
	_, rkc, err := c.user("recoverer", "system:masters")
	if err != nil {
		return true, resumed, err
	}
	if r := c.runBinary(rkc, nil, verb, "--preflight", pf.Path, "--receipts-dir", rdir); r.code != 0 {
		return true, resumed, fmt.Errorf("after %s (%s): %s: exit %d: %s", what, moment(res.stderr), verb, r.code, r.stderr)
	}
	if _, _, err := c.checkConverged(ns, pf.Record, 2, rdir); err != nil {
		return true, resumed, fmt.Errorf("after %s (%s): %v", what, moment(res.stderr), err)
	}
	if err := c.checkRetired(ns); err != nil {
		return true, resumed, fmt.Errorf("after %s (%s): %v", what, moment(res.stderr), err)
	}
	if r := c.runBinary(c.cp.AdminKubeconfig, nil, "receipt", "audit", rdir); r.code != 0 {
		return true, resumed, fmt.Errorf("after %s: receipt audit: exit %d: %s%s", what, r.code, r.stdout, r.stderr)
	}
	return true, resumed, nil
}
