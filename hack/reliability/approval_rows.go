package main

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	apprec "github.com/qinglong/kubectl-ql3/ceremony/approval/record"
	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/internal/faults"
)

// --- racing approvers ----------------------------------------------------------

type approvalRaceTally struct {
	winners, approvedWins, conflicts, settledByRead, dropped, loserWrites, commits, refused int
}

// approvalRace: one proposal, six approvers at once (one in three
// rejects), every third losing its write's answer.
func (c *campaign) approvalRace(cs *caseState) Row {
	const n = 6
	runs := c.runs(10, 1)
	row, t0 := openRow("approval: racing approvers (6 processes, every third losing its answer)", runs,
		"exactly 1 decision lands per proposal (exit 0; a winner whose answer was dropped settled by reading); the rest exit 3 naming the winner; no successful write by a loser; apply commits recording the winner (a winning reject: apply exits 2, Head untouched)")
	var t approvalRaceTally
	approvalRuns(cs, runs, func(run int) error { return c.approvalRaceRun(n, cs.rng(run), &t) })
	row.Observed = fmt.Sprintf("%d winners for %d proposals (%d approve, %d reject); %d losers exited 3 naming the winner; %d decisions settled by reading, %d answers dropped; %d successful writes by losers; %d applies committed with the winner, %d refused after a reject",
		t.winners, runs, t.approvedWins, t.winners-t.approvedWins, t.conflicts, t.settledByRead, t.dropped, t.loserWrites, t.commits, t.refused)
	row.Pass = t.winners == runs && t.loserWrites == 0 && t.commits+t.refused == runs && len(cs.failures()) == 0
	row.Details = map[string]any{"winners": t.winners, "approvedWins": t.approvedWins, "conflicts": t.conflicts, "settledByRead": t.settledByRead,
		"answersDropped": t.dropped, "loserWrites": t.loserWrites, "commits": t.commits, "refusedAfterReject": t.refused}
	return closeRow(cs, row, t0)
}

type racer struct {
	user, kc, verb string
	lose           *faults.Fault // drops the answer to its update; nil: none
	res            procResult
}

func decisionOf(verb string) string {
	if verb == "reject" {
		return apprec.Rejected
	}
	return apprec.Approved
}

func (c *campaign) approvalRaceRun(n int, rng *rand.Rand, t *approvalRaceTally) error {
	p, err := c.newTwoPerson("apprrace", false)
	if err != nil {
		return err
	}
	if r := c.runBinary(p.aliceKC, nil, "propose", "--preflight", p.pf); r.code != 0 {
		return fmt.Errorf("propose: exit %d: %s", r.code, r.stderr)
	}
	rs, err := c.race(p, n, rng)
	if err != nil {
		return err
	}
	win, err := c.judgeRace(p, rs, t)
	if err != nil {
		return err
	}
	r := c.apply(p, p.aliceKC)
	if win.verb == "approve" {
		if r.code != 0 {
			return fmt.Errorf("apply after %s approved: exit %d: %s", win.user, r.code, r.stderr)
		}
		if err := c.committedWith(p, win.user); err != nil {
			return err
		}
		t.commits++
		return nil
	}
	if r.code != 2 || !strings.Contains(r.stderr, "rejected by "+win.user) {
		return fmt.Errorf("apply after %s rejected: exit %d, want 2 naming the rejection: %s", win.user, r.code, r.stderr)
	}
	if err := c.headUntouched(p); err != nil {
		return err
	}
	t.refused++
	return nil
}

// race runs n approvers at once, each its own user; every third through a
// proxy that drops the answer to its update.
func (c *campaign) race(p *twoPerson, n int, rng *rand.Rand) ([]*racer, error) {
	rs := make([]*racer, n)
	for i := range rs {
		u, kc, err := c.user("approver", "system:masters")
		if err != nil {
			return nil, err
		}
		var match faults.Match
		if i%3 == 0 {
			match = approvalUpdate(p.ns)
		}
		lkc, lose, stop, err := c.lossyKubeconfig(kc, p.ns, match)
		if err != nil {
			return nil, err
		}
		defer stop()
		verb := "approve"
		if rng.IntN(3) == 0 {
			verb = "reject"
		}
		rs[i] = &racer{user: u, kc: lkc, verb: verb, lose: lose}
	}
	var wg sync.WaitGroup
	for _, r := range rs {
		wg.Add(1)
		go func() { defer wg.Done(); r.res = c.decide(p, r.kc, r.verb) }()
	}
	wg.Wait()
	return rs, nil
}

// judgeRace finds the one winner (exit 0; settled by reading when its
// answer was dropped), checks the object holds its decision, that every
// loser exited 3 naming it, and the audit log: one successful update by
// the winner, none by a loser. A dropped answer cannot leave the outcome
// undecided (the update reached the API server, so reading settles it):
// exit 4 is a failure.
func (c *campaign) judgeRace(p *twoPerson, rs []*racer, t *approvalRaceTally) (*racer, error) {
	var wins, losers []*racer
	for _, r := range rs {
		if r.lose != nil {
			t.dropped += r.lose.Fired()
		}
		switch r.res.code {
		case 0:
			res, err := result(r.res)
			if err != nil || res.Outcome != decisionOf(r.verb) || res.Approval.Approver != r.user {
				return nil, fmt.Errorf("%s %s: exit 0 but outcome %q approver %q (%v)", r.user, r.verb, res.Outcome, res.Approval.Approver, err)
			}
			if r.lose != nil && r.lose.Fired() > 0 && !res.Settled {
				return nil, fmt.Errorf("%s %s: its answer was dropped, yet exit 0 without settling by reading", r.user, r.verb)
			}
			if res.Settled {
				t.settledByRead++
			}
			wins = append(wins, r)
		case 3:
			losers = append(losers, r)
		default:
			return nil, fmt.Errorf("%s %s: exit %d: %s", r.user, r.verb, r.res.code, r.res.stderr)
		}
	}
	if len(wins) != 1 {
		return nil, fmt.Errorf("%d winners, want 1", len(wins))
	}
	win := wins[0]
	t.winners++
	if win.verb == "approve" {
		t.approvedWins++
	}
	cm, err := c.approvalObject(p.ns)
	if err != nil || cm == nil || cm.Data[apprec.KeyApprover] != win.user || cm.Data[apprec.KeyDecision] != decisionOf(win.verb) {
		return nil, fmt.Errorf("the object holds %v (%v), want %s by %s", cm, err, decisionOf(win.verb), win.user)
	}
	return win, c.judgeWrites(p, win, losers, t)
}

func (c *campaign) judgeWrites(p *twoPerson, win *racer, losers []*racer, t *approvalRaceTally) error {
	for _, l := range losers {
		if l.res.code == 3 {
			if !strings.Contains(l.res.stderr, " by "+win.user+" (") {
				return fmt.Errorf("%s exit 3 does not name the winner %s: %s", l.user, win.user, l.res.stderr)
			}
			t.conflicts++
		}
		ok, _, err := c.approvalWrites(l.user, p.ns)
		if err != nil {
			return err
		}
		if len(ok) > 0 {
			t.loserWrites += len(ok)
			return fmt.Errorf("loser %s has successful writes %v in the audit log", l.user, ok)
		}
	}
	ok, _, err := c.approvalWrites(win.user, p.ns)
	if err != nil || len(ok) != 1 || ok[0] != "update" {
		return fmt.Errorf("winner %s: successful writes %v (%v), want one update", win.user, ok, err)
	}
	return nil
}

// headUntouched checks that p's Head has the resourceVersion it had
// before alice's preflight and that the audit log shows no write of it by
// alice.
func (c *campaign) headUntouched(p *twoPerson) error {
	rv, err := c.headRV(p.ns)
	if err != nil {
		return err
	}
	all, ok, err := c.headWrites(p.alice, p.ns)
	if err != nil {
		return err
	}
	if rv != p.headRV || ok != 0 || all != p.headDenied {
		return fmt.Errorf("head %s: resourceVersion %q, was %q; %d writes by %s (%d succeeded), want only the %d raw ones the API server denied", p.ns, rv, p.headRV, all, p.alice, ok, p.headDenied)
	}
	return nil
}

// --- lost answers --------------------------------------------------------------

// approvalLost: propose's create answer lost, then approve's update
// answer lost: each settles by reading (exit 0, settled), one write each.
func (c *campaign) approvalLost(cs *caseState) Row {
	runs, settled := c.runs(10, 1), 0
	row, t0 := openRow("approval: lost create (propose) and update (approve) answers", 2*runs,
		"exit 0 settled by reading (settled: true in -o json) each time; exactly 1 create by the proposer and 1 update by the approver; apply then commits recording both")
	commits := approvalRuns(cs, runs, func(int) error {
		n, err := c.approvalLostRun()
		settled += n
		return err
	})
	row.Observed = fmt.Sprintf("%d of %d lost answers settled by reading with exactly one write each; %d of %d applies committed recording proposer and approver", settled, 2*runs, commits, runs)
	row.Pass = settled == 2*runs && commits == runs && len(cs.failures()) == 0
	return closeRow(cs, row, t0)
}

func (c *campaign) approvalLostRun() (int, error) {
	p, err := c.newTwoPerson("apprlost", false)
	if err != nil {
		return 0, err
	}
	settled := 0
	for _, s := range []struct {
		user, kc        string
		match           faults.Match
		verb            string
		outcome, method string
	}{
		{p.alice, p.aliceKC, approvalCreate(p.ns), "propose", "proposed", "create"},
		{p.bob, p.bobKC, approvalUpdate(p.ns), "approve", apprec.Approved, "update"},
	} {
		kc, f, stop, err := c.lossyKubeconfig(s.kc, p.ns, s.match)
		if err != nil {
			return settled, err
		}
		r := c.runBinary(kc, nil, s.verb, "--preflight", p.pf, "-o", "json")
		stop()
		res, jerr := result(r)
		ok, all, err := c.approvalWrites(s.user, p.ns)
		if err != nil {
			return settled, err
		}
		if r.code != 0 || jerr != nil || !res.Settled || res.Outcome != s.outcome || f.Fired() != 1 || len(all) != 1 || len(ok) != 1 || ok[0] != s.method {
			return settled, fmt.Errorf("%s with its answer lost: exit %d, outcome %q, settled %v, fault fired %d, writes %v (successful %v): %s",
				s.verb, r.code, res.Outcome, res.Settled, f.Fired(), all, ok, r.stderr)
		}
		settled++
	}
	if r := c.apply(p, p.aliceKC); r.code != 0 {
		return settled, fmt.Errorf("apply: exit %d: %s", r.code, r.stderr)
	}
	return settled, c.committedWith(p, p.bob)
}

// --- kills -------------------------------------------------------------------

// The commands killed in turn, each by a timed kill drawn from its two:
// anywhere from its start, or just after the line it prints before its
// write. Propose and approve go through a proxy holding every answer
// 50ms (they are otherwise over in a few tens of milliseconds); apply
// has a slow client, and its second kill comes after the Head acquire.
var approvalKillSteps = []struct {
	verb  string
	kills [2]timedKill
}{
	{"propose", [2]timedKill{{"", 450 * time.Millisecond}, {"propose: ", 110 * time.Millisecond}}},
	{"approve", [2]timedKill{{"", 450 * time.Millisecond}, {"approve: ", 110 * time.Millisecond}}},
	{"apply", [2]timedKill{{"", 3 * time.Second}, {"apply: acquired", 1500 * time.Millisecond}}},
}

type approvalKillTally struct {
	killed, late, landed map[string]int // by command; landed: killed after its write had landed
	resumed              int
}

// approvalKills: SIGKILL of propose, approve and apply (under the rule)
// at random moments, each rerun until it ends; the end state is one
// approved object and a committed Head recording both people.
func (c *campaign) approvalKills(cs *caseState) Row {
	runs := c.runs(10, 1)
	row, t0 := openRow("approval: SIGKILL of propose, approve and apply at random moments, then rerun", runs,
		"every rerun exits 0; one approved object and a committed Head recording proposer and approver; no Head without the approval after any kill")
	t := &approvalKillTally{killed: map[string]int{}, late: map[string]int{}, landed: map[string]int{}}
	converged := approvalRuns(cs, runs, func(run int) error { return c.approvalKillRun(cs.rng(run), t) })
	row.Observed = fmt.Sprintf("%d/%d runs converged; killed propose %d, approve %d, apply %d times (its write had landed: %d, %d, %d; %d, %d, %d kills came after the end); %d recoveries by resume",
		converged, runs, t.killed["propose"], t.killed["approve"], t.killed["apply"], t.landed["propose"], t.landed["approve"], t.landed["apply"],
		t.late["propose"], t.late["approve"], t.late["apply"], t.resumed)
	row.Pass = converged == runs && len(cs.failures()) == 0
	row.Details = map[string]any{"killed": t.killed, "killedAfterTheWrite": t.landed, "killsAfterTheEnd": t.late, "resumed": t.resumed}
	return closeRow(cs, row, t0)
}

func (c *campaign) approvalKillRun(rng *rand.Rand, t *approvalKillTally) error {
	p, err := c.newTwoPerson("apprkill", false)
	if err != nil {
		return err
	}
	for _, s := range approvalKillSteps {
		kc := p.aliceKC
		if s.verb == "approve" {
			kc = p.bobKC
		}
		res, err := c.killOne(p, kc, s.verb, s.kills[rng.IntN(2)], rng)
		if err != nil {
			return err
		}
		if !res.killed {
			t.late[s.verb]++
			if res.code != 0 {
				return fmt.Errorf("%s was not killed but exited %d: %s", s.verb, res.code, res.stderr)
			}
		} else {
			t.killed[s.verb]++
			if c.wroteBeforeKill(p, s.verb) {
				t.landed[s.verb]++
			}
		}
		if err := c.neverUnapproved(p); err != nil {
			return fmt.Errorf("after the kill of %s: %v", s.verb, err)
		}
		if err := c.rerun(p, kc, s.verb, t); err != nil {
			return err
		}
	}
	if err := c.committedWith(p, p.bob); err != nil {
		return err
	}
	cm, err := c.approvalObject(p.ns)
	if err != nil || cm == nil || cm.Data[apprec.KeyDecision] != apprec.Approved || cm.Data[apprec.KeyProposer] != p.alice || cm.Data[apprec.KeyApprover] != p.bob {
		return fmt.Errorf("the approval object at the end: %v (%v), want approved by %s, proposed by %s", cm, err, p.bob, p.alice)
	}
	return nil
}

// killOne runs verb as kc (propose and approve through a slow proxy,
// apply with a slow client) and kills it by tk.
func (c *campaign) killOne(p *twoPerson, kc, verb string, tk timedKill, rng *rand.Rand) (procResult, error) {
	args := []string{verb, "--preflight", p.pf}
	if verb == "apply" {
		args = append(args, "--receipts-dir", p.rdir, "--qps", "20", "--burst", "1", "--parallelism", "1")
	} else {
		slow, stop, err := c.slowKubeconfig(kc, p.ns, 50*time.Millisecond)
		if err != nil {
			return procResult{}, err
		}
		defer stop()
		kc = slow
	}
	return c.killAt(kc, nil, &tk, rng, args...)
}

// wroteBeforeKill says whether verb's write had landed when it was
// killed: the object proposed, decided, or the Head acquired.
func (c *campaign) wroteBeforeKill(p *twoPerson, verb string) bool {
	if verb == "apply" {
		rv, err := c.headRV(p.ns)
		return err == nil && rv != ""
	}
	cm, err := c.approvalObject(p.ns)
	return err == nil && cm != nil && (verb == "propose" || cm.Data[apprec.KeyDecision] != apprec.Pending)
}

// rerun runs verb again to its end (an apply resumes a Head left applying
// this record): it must exit 0.
func (c *campaign) rerun(p *twoPerson, kc, verb string, t *approvalKillTally) error {
	if verb == "apply" {
		h, err := c.head(p.ns)
		if err != nil {
			return err
		}
		if h != nil && h.Phase == deploy.PhaseApplying && h.Transition.PreflightDigest == p.rec.SelfDigest {
			verb = "resume"
			t.resumed++
		}
	}
	args := []string{verb, "--preflight", p.pf}
	if verb == "apply" || verb == "resume" {
		args = append(args, "--receipts-dir", p.rdir)
	}
	if r := c.runBinary(kc, nil, args...); r.code != 0 {
		return fmt.Errorf("rerun %s: exit %d: %s", verb, r.code, r.stderr)
	}
	return nil
}

// neverUnapproved: a Head in p's namespace, if any, moved for p's record
// with bob's approval of alice's proposal.
func (c *campaign) neverUnapproved(p *twoPerson) error {
	h, err := c.head(p.ns)
	if err != nil || h == nil {
		return err
	}
	if h.Transition.PreflightDigest != p.rec.SelfDigest || h.Approval == nil || h.Approval.Approver != p.bob || h.Approval.Proposer != p.alice {
		return fmt.Errorf("head %s is %s with approval %+v, want preflight %s approved by %s", p.ns, describeHead(h), h.Approval, p.rec.SelfDigest, p.bob)
	}
	return nil
}
