package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/faults"
	"github.com/qinglong/kubectl-ql3/inventory"
)

// faultKind is how a run hides the answer to a mutation it picks. Either
// way the request reaches the API server and is carried out; only what the
// client learns changes (internal/faults).
type faultKind int

const (
	// lost: the answer is thrown away and the client sees a broken
	// connection.
	lost faultKind = iota
	// held: the answer is held back past the client's timeout
	// (rest.Config.Timeout, what --request-timeout sets), so the client
	// gives up with a timeout.
	held
)

// The held kind's timing: the faulty client's timeout, and how long a
// picked answer is held (well past it).
const (
	heldClientTimeout = 1 * time.Second
	heldFor           = 3 * time.Second
)

func (k faultKind) String() string {
	if k == held {
		return "held"
	}
	return "lost"
}

// install puts a fault of kind k on cfg for the mutations pick chooses,
// and returns it with a record of the answers it hid.
func (k faultKind) install(cfg *rest.Config, pick func(*http.Request, []byte) bool) (*faults.Fault, *hidden) {
	rec := &hidden{}
	// The recorder sits under the fault: it sees the server's answer
	// before the fault hides it, on the same request.
	cfg.Wrap(rec.wrap)
	match := func(r *http.Request, body []byte) bool {
		code, _ := rec.codes.LoadAndDelete(r)
		if !isMutation(r) || !pick(r, body) {
			return false
		}
		c, _ := code.(int)
		rec.add(r, c)
		return true
	}
	var f *faults.Fault
	if k == held {
		cfg.Timeout = heldClientTimeout
		f = faults.Delay(cfg, match, heldFor)
	} else {
		f = faults.Drop(cfg, match)
	}
	f.Times = -1 // pick decides, every time
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return contextCancel{rt} })
	return f, rec
}

// contextCancel ends a request by its context only. net/http's client
// timeout also calls the deprecated CancelRequest down client-go's
// wrappers, which log "unable to cancel request" once per held answer for
// a transport without it; the fault already returns when the request's
// context ends.
type contextCancel struct{ http.RoundTripper }

// CancelRequest does nothing: the request's context ends it.
func (contextCancel) CancelRequest(*http.Request) {}

// hidden records the status of every answer by request, and what the
// answers the fault hid were: writes (and whether they landed, 2xx) or
// access reviews, which persist nothing.
type hidden struct {
	next    http.RoundTripper
	codes   sync.Map // *http.Request -> status code, until the fault's matcher takes it
	mu      sync.Mutex
	writes  int      // hidden answers to writes
	reviews int      // hidden answers to access reviews
	landed  []string // the hidden writes that landed: no message may call them unwritten
}

func (h *hidden) wrap(rt http.RoundTripper) http.RoundTripper { h.next = rt; return h }

func (h *hidden) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := h.next.RoundTrip(req)
	if err == nil {
		h.codes.Store(req, resp.StatusCode)
	}
	return resp, err
}

func (h *hidden) add(r *http.Request, code int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case isReview(r):
		h.reviews++
	default:
		h.writes++
		if code >= 200 && code < 300 {
			h.landed = append(h.landed, fmt.Sprintf("%s %s (%d)", r.Method, r.URL.Path, code))
		}
	}
}

// counts returns the hidden writes, access reviews and landed writes.
func (h *hidden) counts() (writes, reviews int, landed []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.writes, h.reviews, append([]string(nil), h.landed...)
}

func isMutation(req *http.Request) bool {
	switch req.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return req.URL.Query().Get("dryRun") == ""
	}
	return false
}

// isReview: a SelfSubjectAccessReview or SelfSubjectRulesReview (a POST
// that persists nothing; the ceremony's permission check before any write).
func isReview(req *http.Request) bool {
	return strings.HasPrefix(req.URL.Path, "/apis/authorization.k8s.io/")
}

// reported counts the progress lines that report a write whose answer did
// not arrive, for the reason kind k gives: the injected loss, or the
// client's timeout ending the request. Each hidden write has its line
// (cas.Write and the ceremony's apply both say so before settling).
func (k faultKind) reported(progress string) int {
	n := 0
	for _, l := range strings.Split(progress, "\n") {
		if !strings.Contains(l, "did not arrive") {
			continue
		}
		switch {
		case k == lost && strings.Contains(l, "injected fault: response lost"):
			n++
		case k == held && (strings.Contains(l, "deadline exceeded") || strings.Contains(l, "Client.Timeout")):
			n++
		}
	}
	return n
}

// nothingWritten finds the lines of text that claim a write did not
// happen.
func nothingWritten(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		low := strings.ToLower(l)
		if strings.Contains(low, "nothing was written") || strings.Contains(low, "nothing of ours was written") {
			out = append(out, l)
		}
	}
	return out
}

// A mutation point: a predicate on a mutating request.
type point struct {
	name    string
	upgrade bool // the point is in an upgrade (Head acquire by update), not an install
	match   func(ns string) func(*http.Request, []byte) bool
}

func headWrite(method, phase string) func(ns string) func(*http.Request, []byte) bool {
	return func(ns string) func(*http.Request, []byte) bool {
		return func(r *http.Request, body []byte) bool {
			if r.Method != method || !strings.Contains(r.URL.Path, "/namespaces/"+ns+"/configmaps") {
				return false
			}
			return bytes.Contains(body, []byte(`\"phase\":\"`+phase+`\"`)) || bytes.Contains(body, []byte(`"phase":"`+phase+`"`))
		}
	}
}

// objectApply matches the server-side apply (not dry-run) of one object.
func objectApply(id inventory.Identity, gvr schema.GroupVersionResource, namespaced bool) func(ns string) func(*http.Request, []byte) bool {
	return func(ns string) func(*http.Request, []byte) bool {
		objNS := id.Namespace
		if objNS == "ql3-demo" {
			objNS = ns
		}
		name := id.Name
		if id.Kind == "Namespace" && name == "ql3-demo" {
			name = ns
		}
		suffix := "/" + gvr.Resource + "/" + name
		if namespaced {
			suffix = "/namespaces/" + objNS + suffix
		}
		return func(r *http.Request, _ []byte) bool {
			return r.Method == http.MethodPatch && strings.HasSuffix(r.URL.Path, suffix)
		}
	}
}

// mutationPoints lists every mutation of an install of v3.0.0 and of an
// upgrade to v3.1.0: the Head create or acquire, each object's apply, and
// the Head commit.
func (c *campaign) mutationPoints() ([]point, error) {
	cl, err := deploy.NewKubeCluster(c.cp.RESTConfig())
	if err != nil {
		return nil, err
	}
	mapper := cl.Mapper()
	var pts []point
	for _, up := range []bool{false, true} {
		fixture, acquire := "v3.0.0", point{"head create (install)", false, headWrite(http.MethodPost, "applying")}
		if up {
			fixture, acquire = "v3.1.0", point{"head acquire (upgrade)", true, headWrite(http.MethodPut, "applying")}
		}
		pts = append(pts, acquire)
		rel, err := inventory.Render(filesys.MakeFsOnDisk(), c.cfg.Root+"/testdata/releases/"+fixture, inventory.Options{})
		if err != nil {
			return nil, err
		}
		for _, id := range rel.Inventory {
			gv, _ := schema.ParseGroupVersion(id.APIVersion)
			m, err := mapper.RESTMapping(gv.WithKind(id.Kind).GroupKind(), gv.Version)
			if err != nil {
				return nil, fmt.Errorf("mapping %s: %w (the warm-up install defines the CRD)", id, err)
			}
			kind := "install"
			if up {
				kind = "upgrade"
			}
			pts = append(pts, point{fmt.Sprintf("apply %s/%s (%s)", id.Kind, id.Name, kind), up,
				objectApply(id, m.Resource, m.Scope.Name() == meta.RESTScopeNameNamespace)})
		}
		commit := "head commit (install)"
		if up {
			commit = "head commit (upgrade)"
		}
		pts = append(pts, point{commit, up, headWrite(http.MethodPut, "committed")})
	}
	return pts, nil
}

// faultPlan is what one run injects.
type faultPlan struct {
	desc    string
	upgrade bool
	retire  bool // a retire of the base release (retire.go), not an install or upgrade
	drop    func(ns string, rng *rand.Rand) func(*http.Request, []byte) bool
	mustHit bool
}

func onePoint(p point, times int32) faultPlan {
	desc := p.name
	if times > 1 {
		desc = fmt.Sprintf("%s, %d responses in a row", p.name, times)
	}
	return faultPlan{desc: desc, upgrade: p.upgrade, mustHit: true, drop: func(ns string, _ *rand.Rand) func(*http.Request, []byte) bool {
		m := p.match(ns)
		var n atomic.Int32
		return func(r *http.Request, b []byte) bool { return m(r, b) && n.Add(1) <= times }
	}}
}

func kthMutation(k int32, upgrade bool) faultPlan {
	return faultPlan{desc: fmt.Sprintf("the %d. mutation", k), upgrade: upgrade, drop: func(string, *rand.Rand) func(*http.Request, []byte) bool {
		var n atomic.Int32
		return func(*http.Request, []byte) bool { return n.Add(1) == k }
	}}
}

func everyMutation(p float64, upgrade bool) faultPlan {
	return faultPlan{desc: fmt.Sprintf("each mutation with probability %.2f", p), upgrade: upgrade, drop: func(_ string, rng *rand.Rand) func(*http.Request, []byte) bool {
		var mu sync.Mutex
		return func(*http.Request, []byte) bool {
			mu.Lock()
			defer mu.Unlock()
			return rng.Float64() < p
		}
	}}
}

// quickHeld names the plans the quick campaign also runs with the answer
// held: a create, an apply and an update,
// and the retire's fenced delete.
var quickHeld = map[string]bool{"head create (install)": true, "apply Deployment/ql3-worker (install)": true, "head commit (upgrade)": true,
	quickRetireDelete: true}

// kindStats counts one fault kind's runs.
type kindStats struct {
	runs, converged, firstOK, firstUnavailable atomic.Int64
	writes, reviews, landed, reported          atomic.Int64
	falseClaims                                atomic.Int64
}

func (s *kindStats) observed(k faultKind) string {
	how, why := "dropped", "lost answers"
	if k == held {
		how, why = fmt.Sprintf("held %s past a %s client timeout", heldFor, heldClientTimeout), "client timeouts"
	}
	return fmt.Sprintf("%s: %d/%d converged (%d write answers %s, %d of those writes had landed, %d %s reported and settled, %d access-review answers %s; first run: %d ok, %d exit 4 then rerun; %d \"nothing was written\" for a landed write)",
		k, s.converged.Load(), s.runs.Load(), s.writes.Load(), how, s.landed.Load(), s.reported.Load(), why, s.reviews.Load(), k.verb(),
		s.firstOK.Load(), s.firstUnavailable.Load(), s.falseClaims.Load())
}

func (k faultKind) verb() string {
	if k == held {
		return "held"
	}
	return "dropped"
}

func (s *kindStats) details() map[string]any {
	return map[string]any{"runs": s.runs.Load(), "converged": s.converged.Load(),
		"hiddenWriteAnswers": s.writes.Load(), "hiddenWritesLanded": s.landed.Load(), "reportedAndSettled": s.reported.Load(),
		"hiddenAccessReviewAnswers": s.reviews.Load(), "firstRunCommitted": s.firstOK.Load(),
		"firstRunUnavailable": s.firstUnavailable.Load(), "nothingWrittenClaimsForLandedWrites": s.falseClaims.Load()}
}

// caseLostResponses: every mutation point once, then random plans; each
// plan once with its answers lost and once with them held past the
// client's timeout (the quick campaign holds only quickHeld's).
func caseLostResponses(c *campaign, cs *caseState) []Row {
	row := Row{Case: "lost responses", Expected: "every run, answer lost or held past the client timeout, converges by rerun to one committed Head, byte-identical receipts (a retire: each retired object deleted exactly once, by the audit log); no message says nothing was written for a write that landed"}
	pts, err := c.mutationPoints()
	if err != nil {
		cs.failf("mutation points: %v", err)
		return []Row{row}
	}
	total := c.runs(120, 6)
	var plans []faultPlan
	if c.cfg.Quick {
		// The Head's three writes, and one object apply each way.
		for _, p := range pts {
			if strings.HasPrefix(p.name, "head") || strings.HasPrefix(p.name, "apply Deployment/ql3-worker") {
				plans = append(plans, onePoint(p, 1))
			}
		}
		for _, p := range retirePoints() {
			if p.name == quickRetireDelete {
				plans = append(plans, retirePlan(p, 1))
			}
		}
	} else {
		for _, p := range pts {
			plans = append(plans, onePoint(p, 1))
		}
		for _, p := range retirePoints() {
			plans = append(plans, retirePlan(p, 1), retirePlan(p, 2))
		}
	}
	for i := len(plans); i < total; i++ {
		rng := cs.rng(1_000_000 + i)
		up := rng.IntN(2) == 1
		switch rng.IntN(3) {
		case 0:
			var cand []point
			for _, p := range pts {
				if p.upgrade == up {
					cand = append(cand, p)
				}
			}
			plans = append(plans, onePoint(cand[rng.IntN(len(cand))], int32(2+rng.IntN(5))))
		case 1:
			plans = append(plans, kthMutation(int32(1+rng.IntN(20)), up))
		default:
			plans = append(plans, everyMutation(0.1+0.4*rng.Float64(), up))
		}
	}
	// A run is a plan and a kind; both kinds of a plan draw the same
	// random numbers (cs.rng(plan index)).
	type job struct {
		plan int
		kind faultKind
	}
	var jobs []job
	for _, kind := range []faultKind{lost, held} {
		for i, p := range plans {
			if kind == held && c.cfg.Quick && !quickHeld[p.desc] {
				continue
			}
			jobs = append(jobs, job{i, kind})
		}
	}
	row.Runs = len(jobs)
	stats := map[faultKind]*kindStats{lost: {}, held: {}}
	var retireRuns, retireConverged atomic.Int64
	c.parallel(len(jobs), func(j int) {
		i, kind := jobs[j].plan, jobs[j].kind
		st := stats[kind]
		st.runs.Add(1)
		if plans[i].retire {
			retireRuns.Add(1)
		}
		r, err := c.lostRun(plans[i], kind, cs.rng(i))
		st.writes.Add(int64(r.writes))
		st.reviews.Add(int64(r.reviews))
		st.landed.Add(int64(len(r.landed)))
		st.reported.Add(int64(r.reported))
		if len(r.claims) > 0 {
			st.falseClaims.Add(int64(len(r.claims)))
			cs.failf("run %d (%s, answer %s): said %q although the write(s) it hid had landed: %s [replay: -seed %d -case lost]",
				i, plans[i].desc, kind, r.claims, strings.Join(r.landed, ", "), cs.seed)
		}
		if err != nil {
			cs.failf("run %d (%s, answer %s): %v [replay: -seed %d -case lost]", i, plans[i].desc, kind, err, cs.seed)
			return
		}
		st.converged.Add(1)
		if plans[i].retire {
			retireConverged.Add(1)
		}
		if r.class == "ok" {
			st.firstOK.Add(1)
		} else {
			st.firstUnavailable.Add(1)
		}
	})
	row.Observed = stats[lost].observed(lost) + "; " + stats[held].observed(held) +
		fmt.Sprintf("; of all runs %d/%d retires converged, each retired object deleted exactly once", retireConverged.Load(), retireRuns.Load())
	row.Pass = stats[lost].converged.Load()+stats[held].converged.Load() == int64(row.Runs) &&
		stats[lost].falseClaims.Load()+stats[held].falseClaims.Load() == 0
	row.Details = map[string]any{"mutationPoints": len(pts), "plans": len(plans),
		"heldClientTimeoutSeconds": heldClientTimeout.Seconds(), "heldForSeconds": heldFor.Seconds(),
		"retireRuns": retireRuns.Load(), "retireConverged": retireConverged.Load(),
		"lost": stats[lost].details(), "held": stats[held].details()}
	return []Row{row}
}

// lostResult is what one run saw.
type lostResult struct {
	writes, reviews int      // answers the fault hid: to writes, to access reviews
	landed          []string // the hidden writes that landed (2xx)
	reported        int      // the first run's progress lines reporting a hidden answer (faultKind.reported)
	claims          []string // lines of the first run that say nothing was written, when some hidden write had landed
	class           string   // the first run: "ok" or "unavailable"
}

// lostRun is one run: a faulty apply (answers lost or held, as kind says),
// a rerun (resume if it left the Head applying), the end-state check, and
// a replay.
func (c *campaign) lostRun(plan faultPlan, kind faultKind, rng *rand.Rand) (res lostResult, err error) {
	ns, rdir, pf, gen, err := c.lostSetup(plan)
	if err != nil {
		return res, err
	}
	clean, err := c.adminOptions(rdir)
	if err != nil {
		return res, err
	}
	cfg := c.cp.RESTConfig()
	cfg.QPS, cfg.Burst = 500, 1000
	fault, rec := kind.install(cfg, plan.drop(ns, rng))
	faulty, err := c.options(cfg, rdir)
	if err != nil {
		return res, err
	}
	var progress syncBuffer
	faulty.Progress = &progress
	ctx := context.Background()
	first, ferr := deploy.RunApply(ctx, faulty, deploy.ApplyRequest{Preflight: pf.Record})
	res.writes, res.reviews, res.landed = rec.counts()
	if res.writes+res.reviews != fault.Fired() {
		return res, fmt.Errorf("the fault hid %d answers, the recorder saw %d", fault.Fired(), res.writes+res.reviews)
	}
	said := progress.String()
	if ferr != nil {
		said += "\n" + ferr.Error()
	}
	if len(res.landed) > 0 {
		res.claims = nothingWritten(said)
	}
	res.reported = kind.reported(progress.String())
	if plan.mustHit && res.writes == 0 {
		return res, fmt.Errorf("the fault never fired: the run exercised nothing")
	}
	if res.reported < res.writes {
		return res, fmt.Errorf("%d write answer(s) %s, but only %d progress line(s) report one:\n%s", res.writes, kind.verb(), res.reported, said)
	}
	var firstReceipt []byte
	switch {
	case ferr == nil:
		res.class = "ok"
		if first.Outcome != "committed" {
			return res, fmt.Errorf("first run: outcome %q", first.Outcome)
		}
		firstReceipt = readFile(first.Receipt)
	case fail.Is(ferr, fail.Unavailable):
		res.class = "unavailable"
	default:
		return res, fmt.Errorf("first run: %v (class %v), want success or unavailable", ferr, fail.ClassOf(ferr))
	}
	h, err := c.head(ns)
	if err != nil {
		return res, err
	}
	resume := h != nil && h.Phase == deploy.PhaseApplying && h.Transition.PreflightDigest == pf.Record.SelfDigest
	if _, err := deploy.RunApply(ctx, clean, deploy.ApplyRequest{Preflight: pf.Record, Resume: resume}); err != nil {
		return res, fmt.Errorf("rerun (resume=%v, head %s): %v", resume, describeHead(h), err)
	}
	_, want, err := c.checkConverged(ns, pf.Record, gen, rdir)
	if err != nil {
		return res, err
	}
	if plan.retire {
		if err := c.checkRetired(ns); err != nil {
			return res, err
		}
	}
	if firstReceipt != nil && !bytes.Equal(firstReceipt, want) {
		return res, fmt.Errorf("the first run's receipt differs from the converged one")
	}
	again, err := deploy.RunApply(ctx, clean, deploy.ApplyRequest{Preflight: pf.Record})
	if err != nil || again.Outcome != "replayed" || again.ReceiptState != "replayed" || !bytes.Equal(readFile(again.Receipt), want) {
		return res, fmt.Errorf("replay: %+v, %v", again, err)
	}
	return res, nil
}

// lostSetup prepares a run's namespace, receipts directory and
// preflight, and says the generation it commits: an install of v3.0.0
// (1), an upgrade of it to v3.1.0 (2), or a retire (2, retire.go).
func (c *campaign) lostSetup(plan faultPlan) (ns, rdir string, pf *deploy.PreflightResult, gen int64, err error) {
	if plan.retire {
		ns, rdir, pf, err = c.retireSetup("lost-retire")
		return ns, rdir, pf, 2, err
	}
	if ns, err = c.namespace("lost"); err != nil {
		return "", "", nil, 0, err
	}
	rdir = c.work + "/receipts/" + ns
	clean, err := c.adminOptions(rdir)
	if err != nil {
		return "", "", nil, 0, err
	}
	v300, err := c.release("v3.0.0", ns, "")
	if err != nil {
		return "", "", nil, 0, err
	}
	dir, transition, exp, gen := v300, deploy.TransitionInstall, deploy.ExpectedHead{}, int64(1)
	if plan.upgrade {
		if _, err := c.deploy(clean, v300, deploy.TransitionInstall, deploy.ExpectedHead{}); err != nil {
			return "", "", nil, 0, fmt.Errorf("clean install: %w", err)
		}
		h, err := c.head(ns)
		if err != nil {
			return "", "", nil, 0, err
		}
		if dir, err = c.release("v3.1.0", ns, ""); err != nil {
			return "", "", nil, 0, err
		}
		transition, exp, gen = deploy.TransitionUpgrade, h.Expected(), 2
	}
	if pf, err = c.preflight(clean, dir, transition, exp); err != nil {
		return "", "", nil, 0, fmt.Errorf("preflight: %w", err)
	}
	return ns, rdir, pf, gen, nil
}

func readFile(path string) []byte {
	data, _ := os.ReadFile(path)
	return data
}
