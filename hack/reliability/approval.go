package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/qinglong/kubectl-ql3/ceremony/approval"
	"github.com/qinglong/kubectl-ql3/ceremony/approval/gate"
	apprec "github.com/qinglong/kubectl-ql3/ceremony/approval/record"
	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/internal/faults"
)

// The two-person rule's rows (issue #26, docs/approval.md): racing
// approvers, lost answers, kills, the apply gate's refusals and forgeries,
// and tampered approval objects, all through the built binary against the
// campaign's API server enforcing the printed admission policy. Every
// person is a client-certificate user in system:masters, so only the
// policy, not RBAC, stands between them and a forgery.

// caseApproval installs the printed policy once, as the admin, then runs
// the five rows one after another (the tamper row switches the policy's
// binding off for a moment: nothing else may run against the policy then).
func caseApproval(c *campaign, cs *caseState) []Row {
	if err := c.installApprovalPolicy(); err != nil {
		cs.failf("install the approval policy: %v", err)
		return []Row{{Case: "approval: the printed policy installed", Runs: 1, Expected: "kubectl ql3 approval policy | kubectl apply -f -, enforced", Observed: err.Error(), Failures: cs.failures()}}
	}
	return []Row{c.approvalRace(cs), c.approvalLost(cs), c.approvalKills(cs), c.approvalRefusals(cs), c.approvalTamper(cs)}
}

// approvalRuns runs fn for each of runs runs, one after another (the
// rows share the policy, and the tamper row switches it off for a
// moment), logs each failure with how to replay it, and returns how many
// runs ended without one.
func approvalRuns(cs *caseState, runs int, fn func(run int) error) int {
	ok := 0
	for run := range runs {
		if err := fn(run); err != nil {
			cs.failf("run %d: %v [replay: -seed %d -case approval]", run, err, cs.seed)
			continue
		}
		ok++
	}
	return ok
}

// openRow starts a row of the case, and its clock.
func openRow(name string, runs int, expected string) (Row, time.Time) {
	return Row{Case: name, Runs: runs, Expected: expected}, time.Now()
}

// closeRow ends row: its time since t0 and the failures logged since the
// previous row (cleared for the next).
func closeRow(cs *caseState, row Row, t0 time.Time) Row {
	row.Seconds = time.Since(t0).Seconds()
	row.Failures = cs.failures()
	cs.fail, cs.nf = nil, 0
	return row
}

// installApprovalPolicy applies what `kubectl ql3 approval policy`
// prints with the admin's kubectl, as a cluster admin does, and waits
// until the API server enforces it.
func (c *campaign) installApprovalPolicy() error {
	p := c.runBinary(c.cp.AdminKubeconfig, nil, "approval", "policy")
	if p.code != 0 {
		return fmt.Errorf("approval policy: exit %d: %s", p.code, p.stderr)
	}
	cmd := exec.Command(filepath.Join(c.cp.BinDir, "kubectl"), "apply", "-f", "-")
	cmd.Env = append(cleanEnv(), "KUBECONFIG="+c.cp.AdminKubeconfig)
	cmd.Stdin = strings.NewReader(p.stdout)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("kubectl apply the policy: %v: %s", err, out)
	}
	return c.waitEnforced()
}

// waitEnforced polls gate.VerifyPolicy (the gate's own proof: the policies
// and bindings as printed, dry-run forgeries denied) with a 30s deadline —
// the API server compiles a policy a moment after it is written — and
// until their attestation window is over, so later approvals count.
func (c *campaign) waitEnforced() error {
	ns, err := c.namespace("apprpolicy")
	if err != nil {
		return err
	}
	var last error
	var e gate.Enforced
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		e, last = gate.VerifyPolicy(ctx, c.admin, ns)
		return last == nil && e.Attested(time.Now().Add(-time.Second)), nil
	}); err != nil {
		return fmt.Errorf("the approval policies are not enforced, or their attestation window not over, after 30s: %v", last)
	}
	return nil
}

// twoPerson is one namespace and its two people: alice ran the preflight
// (with --approval two-person) and proposes, bob decides.
type twoPerson struct {
	ns, pf, rdir       string
	rec                *deploy.PreflightRecord
	alice, aliceKC     string
	bob, bobKC         string
	headRV             string // the Head's resourceVersion before alice's preflight ("" absent)
	headDenied         int    // alice's raw Head writes the API server denied (forgeHead)
	releaseDir, expect string
}

// newTwoPerson makes a namespace, two users and alice's preflight of an
// install (upgrade: the admin installs 3.0.0 first, alice preflights an
// upgrade to 3.1.0 against that Head).
func (c *campaign) newTwoPerson(prefix string, upgrade bool) (*twoPerson, error) {
	ns, err := c.namespace(prefix)
	if err != nil {
		return nil, err
	}
	p := &twoPerson{ns: ns, rdir: filepath.Join(c.work, "receipts", ns), expect: deploy.AbsentToken}
	fixture := "v3.0.0"
	if upgrade {
		// The admin's install publishes its receipt where alice's will go:
		// one chain, generation 1 without the rule, 2 turning it on.
		admin, err := c.adminOptions(p.rdir)
		if err != nil {
			return nil, err
		}
		dir, err := c.release("v3.0.0", ns, "")
		if err != nil {
			return nil, err
		}
		if _, err := c.deploy(admin, dir, deploy.TransitionInstall, deploy.ExpectedHead{}); err != nil {
			return nil, fmt.Errorf("admin install: %w", err)
		}
		h, err := c.head(ns)
		if err != nil {
			return nil, err
		}
		fixture, p.expect = "v3.1.0", h.Expected().String()
	}
	if p.releaseDir, err = c.release(fixture, ns, ""); err != nil {
		return nil, err
	}
	if p.alice, p.aliceKC, err = c.user("alice", "system:masters"); err != nil {
		return nil, err
	}
	if p.bob, p.bobKC, err = c.user("bob", "system:masters"); err != nil {
		return nil, err
	}
	if p.pf, p.rec, err = c.preflightAs(p, p.releaseDir); err != nil {
		return nil, err
	}
	p.headRV, err = c.headRV(ns)
	return p, err
}

// preflightAs runs alice's preflight of dir through the binary, with the
// two-person rule, and reads the record back as apply reads it.
func (c *campaign) preflightAs(p *twoPerson, dir string) (string, *deploy.PreflightRecord, error) {
	transition := deploy.TransitionInstall
	if p.expect != deploy.AbsentToken {
		transition = deploy.TransitionUpgrade
	}
	out := filepath.Join(c.work, "preflights", fmt.Sprintf("appr-%d.json", c.serial.Add(1)))
	r := c.runBinary(p.aliceKC, nil, "preflight", dir, "--transition", transition, "--expected-head", p.expect, "--approval", deploy.ApprovalTwoPerson, "--out", out)
	if r.code != 0 || !strings.Contains(r.stderr, "proposer "+p.alice) {
		return "", nil, fmt.Errorf("preflight --approval two-person as %s: exit %d: %s", p.alice, r.code, r.stderr)
	}
	rec, err := deploy.ReadPreflight(out)
	return out, rec, err
}

// decide runs approve (or reject with a reason) of p's record as kc,
// with -o json.
func (c *campaign) decide(p *twoPerson, kc, verb string) procResult {
	args := []string{verb, "--preflight", p.pf, "-o", "json"}
	if verb == "reject" {
		args = append(args, "--reason", "not this week")
	}
	return c.runBinary(kc, nil, args...)
}

func (c *campaign) apply(p *twoPerson, kc string) procResult {
	return c.runBinary(kc, nil, "apply", "--preflight", p.pf, "--receipts-dir", p.rdir)
}

// result parses a propose / approve / reject -o json.
func result(r procResult) (approval.Result, error) {
	var res approval.Result
	err := json.Unmarshal([]byte(r.stdout), &res)
	return res, err
}

// approvalStatus is `approval status -n ns -o json` as the admin.
func (c *campaign) approvalStatus(ns string) (approval.StatusReport, procResult) {
	r := c.runBinary(c.cp.AdminKubeconfig, nil, "approval", "status", "-n", ns, "-o", "json")
	var st approval.StatusReport
	if r.code == 0 {
		if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
			r.code, r.stderr = -1, "status -o json: "+err.Error()
		}
	}
	return st, r
}

// approvalObject is ns's approval ConfigMap as the admin reads it (nil:
// absent).
func (c *campaign) approvalObject(ns string) (*corev1.ConfigMap, error) {
	cm, err := c.admin.CoreV1().ConfigMaps(ns).Get(context.Background(), apprec.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return cm, err
}

// headRV is the Head ConfigMap's resourceVersion ("" absent).
func (c *campaign) headRV(ns string) (string, error) {
	cm, err := c.admin.CoreV1().ConfigMaps(ns).Get(context.Background(), deploy.HeadName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return cm.ResourceVersion, nil
}

// headWrites counts user's writes of ns's Head in the audit log so far,
// whatever their answer (a refused apply sends none at all).
func (c *campaign) headWrites(user, ns string) (all, succeeded int, err error) {
	evs, err := c.writes(user)
	for _, e := range evs {
		if e.ObjectRef.Resource == "configmaps" && e.ObjectRef.Namespace == ns && e.ObjectRef.Name == deploy.HeadName {
			all++
			if e.ResponseStatus.Code < 300 {
				succeeded++
			}
		}
	}
	return all, succeeded, err
}

// approvalWrites are user's writes of ConfigMaps in ns (the approval
// object's: the only ConfigMap an approval command writes), successful
// (2xx) and all.
func (c *campaign) approvalWrites(user, ns string) (ok, all []string, err error) {
	evs, err := c.writes(user)
	for _, e := range evs {
		if e.ObjectRef.Resource != "configmaps" || e.ObjectRef.Namespace != ns || e.ObjectRef.Name == deploy.HeadName {
			continue
		}
		all = append(all, e.Verb)
		if e.ResponseStatus.Code < 300 {
			ok = append(ok, e.Verb)
		}
	}
	return ok, all, err
}

// lossyKubeconfig is a kubeconfig for the user of kc through a proxy that
// drops the answer to the first request match selects (nil: none).
func (c *campaign) lossyKubeconfig(kc, ns string, match faults.Match) (string, *faults.Fault, func(), error) {
	if match == nil {
		return kc, nil, func() {}, nil
	}
	f := faults.NewDrop(match)
	path, stop, err := c.proxiedKubeconfig(kc, ns, f)
	return path, f, stop, err
}

// slowKubeconfig is a kubeconfig for the user of kc through a proxy that
// holds every answer back for hold: a command of a few requests then
// lasts long enough for a timed kill to land inside it, often between a
// write's landing and its answer.
func (c *campaign) slowKubeconfig(kc, ns string, hold time.Duration) (string, func(), error) {
	f := faults.NewDelay(func(*http.Request, []byte) bool { return true }, hold)
	f.Times = -1
	return c.proxiedKubeconfig(kc, ns, f)
}

// proxiedKubeconfig is a kubeconfig for the user of kc through a proxy
// with the fault f on its transport.
func (c *campaign) proxiedKubeconfig(kc, ns string, f *faults.Fault) (string, func(), error) {
	cfg, err := c.restConfig(kc)
	if err != nil {
		return "", nil, err
	}
	px, err := faults.NewProxy(cfg, f.Wrap)
	if err != nil {
		return "", nil, err
	}
	path := filepath.Join(c.work, fmt.Sprintf("proxied-%d.kubeconfig", c.serial.Add(1)))
	return path, px.Close, px.Kubeconfig(path, ns)
}

// The writes whose answers the proxies drop: the approval's create
// (propose) and its update (approve, reject). Dry-run creates (the gate's
// probes) are not matched.
func approvalCreate(ns string) faults.Match {
	return faults.Write(http.MethodPost, "/namespaces/"+ns+"/configmaps", apprec.Name)
}

func approvalUpdate(ns string) faults.Match {
	return faults.Write(http.MethodPut, "/namespaces/"+ns+"/configmaps/"+apprec.Name)
}

// committedWith checks the end state of an approved transition: the Head
// committed at generation 1 (install) or 2 (upgrade) with p's record, the
// receipts an audited chain, and the Head recording exactly proposer and
// approver.
func (c *campaign) committedWith(p *twoPerson, approver string) error {
	gen := int64(1)
	if p.expect != deploy.AbsentToken {
		gen = 2
	}
	h, _, err := c.checkConverged(p.ns, p.rec, gen, p.rdir)
	if err != nil {
		return err
	}
	if h.Approval == nil || h.Approval.Proposer != p.alice || h.Approval.Approver != approver || h.ApprovalPolicy != deploy.ApprovalTwoPerson {
		return fmt.Errorf("head %s records approval %+v (policy %q), want proposed by %s, approved by %s", p.ns, h.Approval, h.ApprovalPolicy, p.alice, approver)
	}
	return nil
}
