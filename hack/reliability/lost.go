package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/qinglong/kubectl-ql3/ceremony"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory"
)

// lossRT executes every request, and for the mutations that drop() picks
// throws the answer away and reports a broken connection: the write
// happened, the client cannot know.
type lossRT struct {
	next  http.RoundTripper
	drop  func(req *http.Request, body []byte) bool
	fired atomic.Int32
	seen  atomic.Int32 // mutations seen
}

func isMutation(req *http.Request) bool {
	switch req.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return req.URL.Query().Get("dryRun") == ""
	}
	return false
}

func (l *lossRT) RoundTrip(req *http.Request) (*http.Response, error) {
	if !isMutation(req) {
		return l.next.RoundTrip(req)
	}
	var body []byte
	if req.Body != nil && req.GetBody != nil {
		if rc, err := req.GetBody(); err == nil {
			body, _ = io.ReadAll(rc)
			rc.Close()
		}
	}
	l.seen.Add(1)
	resp, err := l.next.RoundTrip(req)
	if err != nil || !l.drop(req, body) {
		return resp, err
	}
	l.fired.Add(1)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return nil, fmt.Errorf("injected fault: response lost after the server executed %s %s", req.Method, req.URL.Path)
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
	cl, err := ceremony.NewKubeCluster(c.cp.RESTConfig())
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

// caseLostResponses: every mutation point once, then random plans.
func caseLostResponses(c *campaign, cs *caseState) []Row {
	row := Row{Case: "lost responses", Expected: "every run converges by rerun to one committed Head, byte-identical receipts"}
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
	} else {
		for _, p := range pts {
			plans = append(plans, onePoint(p, 1))
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
	row.Runs = len(plans)
	var converged, firstOK, firstUnavailable, dropped atomic.Int64
	c.parallel(len(plans), func(i int) {
		fired, class, err := c.lostRun(plans[i], cs.rng(i))
		dropped.Add(int64(fired))
		if err != nil {
			cs.failf("run %d (%s): %v [replay: -seed %d -case lost]", i, plans[i].desc, err, cs.seed)
			return
		}
		converged.Add(1)
		if class == "ok" {
			firstOK.Add(1)
		} else {
			firstUnavailable.Add(1)
		}
	})
	row.Observed = fmt.Sprintf("%d/%d converged (%d responses dropped; first run: %d ok, %d exit 4 then rerun)",
		converged.Load(), row.Runs, dropped.Load(), firstOK.Load(), firstUnavailable.Load())
	row.Pass = converged.Load() == int64(row.Runs)
	row.Details = map[string]any{"mutationPoints": len(pts), "droppedResponses": dropped.Load(),
		"firstRunCommitted": firstOK.Load(), "firstRunUnavailable": firstUnavailable.Load()}
	return []Row{row}
}

// lostRun is one run: a faulty apply, a rerun (resume if it left the Head
// applying), the end-state check, and a replay.
func (c *campaign) lostRun(plan faultPlan, rng *rand.Rand) (fired int32, class string, err error) {
	ns, err := c.namespace("lost")
	if err != nil {
		return 0, "", err
	}
	rdir := c.work + "/receipts/" + ns
	clean, err := c.adminOptions(rdir)
	if err != nil {
		return 0, "", err
	}
	v300, err := c.release("v3.0.0", ns, "")
	if err != nil {
		return 0, "", err
	}
	dir, kind, exp, gen := v300, ceremony.TransitionInstall, ceremony.ExpectedHead{}, int64(1)
	if plan.upgrade {
		if _, err := c.deploy(clean, v300, ceremony.TransitionInstall, ceremony.ExpectedHead{}); err != nil {
			return 0, "", fmt.Errorf("clean install: %w", err)
		}
		h, err := c.head(ns)
		if err != nil {
			return 0, "", err
		}
		if dir, err = c.release("v3.1.0", ns, ""); err != nil {
			return 0, "", err
		}
		kind, exp, gen = ceremony.TransitionUpgrade, h.Expected(), 2
	}
	pf, err := c.preflight(clean, dir, kind, exp)
	if err != nil {
		return 0, "", fmt.Errorf("preflight: %w", err)
	}
	cfg := c.cp.RESTConfig()
	cfg.QPS, cfg.Burst = 500, 1000
	lrt := &lossRT{drop: plan.drop(ns, rng)}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { lrt.next = rt; return lrt })
	faulty, err := c.options(cfg, rdir)
	if err != nil {
		return 0, "", err
	}
	ctx := context.Background()
	first, ferr := ceremony.RunApply(ctx, faulty, ceremony.ApplyRequest{Preflight: pf.Record})
	fired = lrt.fired.Load()
	if plan.mustHit && fired == 0 {
		return fired, "", fmt.Errorf("the fault never fired: the run exercised nothing")
	}
	var firstReceipt []byte
	switch {
	case ferr == nil:
		class = "ok"
		if first.Outcome != "committed" {
			return fired, "", fmt.Errorf("first run: outcome %q", first.Outcome)
		}
		firstReceipt = readFile(first.Receipt)
	case fail.Is(ferr, fail.Unavailable):
		class = "unavailable"
	default:
		return fired, "", fmt.Errorf("first run: %v (class %v), want success or unavailable", ferr, fail.ClassOf(ferr))
	}
	h, err := c.head(ns)
	if err != nil {
		return fired, class, err
	}
	resume := h != nil && h.Phase == ceremony.PhaseApplying && h.Transition.PreflightDigest == pf.Record.SelfDigest
	if _, err := ceremony.RunApply(ctx, clean, ceremony.ApplyRequest{Preflight: pf.Record, Resume: resume}); err != nil {
		return fired, class, fmt.Errorf("rerun (resume=%v, head %s): %v", resume, describeHead(h), err)
	}
	_, want, err := c.checkConverged(ns, pf.Record, gen, rdir)
	if err != nil {
		return fired, class, err
	}
	if firstReceipt != nil && !bytes.Equal(firstReceipt, want) {
		return fired, class, fmt.Errorf("the first run's receipt differs from the converged one")
	}
	again, err := ceremony.RunApply(ctx, clean, ceremony.ApplyRequest{Preflight: pf.Record})
	if err != nil || again.Outcome != "replayed" || again.ReceiptState != "replayed" || !bytes.Equal(readFile(again.Receipt), want) {
		return fired, class, fmt.Errorf("replay: %+v, %v", again, err)
	}
	return fired, class, nil
}

func readFile(path string) []byte {
	data, _ := os.ReadFile(path)
	return data
}
