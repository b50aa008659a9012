package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
)

// caseRace: N plugin processes, each its own client-certificate user, apply
// the same preflight at once. Exactly one commits; the others exit
// "conflict" (3) or, arriving after the commit, replay it (0, no write);
// by the API server's audit log none but the winner writes a workload
// object.
func caseRace(c *campaign, cs *caseState) []Row {
	var rows []Row
	for _, n := range []int{2, 8, 32} {
		full, quick := map[int]int{2: 12, 8: 6, 32: 3}[n], map[int]int{2: 2, 8: 1, 32: 1}[n]
		runs := c.runs(full, quick)
		row := Row{Case: fmt.Sprintf("racing operators (%d processes)", n), Runs: runs,
			Expected: "exactly 1 commit per run; the rest conflict (exit 3) or replay (exit 0); 0 workload writes by non-committers"}
		t0 := time.Now()
		var commits, conflicts, replays, otherExits, loserWrites, loserHeadWrites, headRaces int
		for i := 0; i < runs; i++ {
			st, err := c.raceRun(n)
			if err != nil {
				cs.failf("%d processes, run %d: %v", n, i, err)
				continue
			}
			commits += st.commits
			conflicts += st.conflicts
			replays += st.replays
			otherExits += st.other
			loserWrites += st.loserWrites
			loserHeadWrites += st.loserHeadWrites
			headRaces += st.headAttempts
			if st.commits != 1 || st.other != 0 || st.loserWrites != 0 || st.loserHeadWrites != 0 || !st.committedHead {
				cs.failf("%d processes, run %d: %d commits, %d other exits (%s), %d workload writes by non-committers (%s), head committed %v",
					n, i, st.commits, st.other, st.otherDetail, st.loserWrites, st.loserDetail, st.committedHead)
			}
		}
		row.Observed = fmt.Sprintf("%d commits in %d runs; %d conflicts, %d replays, %d other exits; %d workload writes by non-committers (%d Head writes lost the CAS)",
			commits, runs, conflicts, replays, otherExits, loserWrites, headRaces)
		row.Pass = commits == runs && otherExits == 0 && loserWrites == 0 && loserHeadWrites == 0
		row.Details = map[string]any{"processes": n, "commits": commits, "conflicts": conflicts, "replays": replays,
			"otherExits": otherExits, "nonCommitterWorkloadWrites": loserWrites, "nonCommitterHeadWritesAccepted": loserHeadWrites,
			"nonCommitterHeadWriteAttempts": headRaces}
		row.Seconds = time.Since(t0).Seconds()
		row.Failures = cs.failures()
		cs.fail, cs.nf = nil, 0
		rows = append(rows, row)
	}
	return rows
}

type raceStats struct {
	commits, conflicts, replays, other int
	otherDetail                        string
	loserWrites, loserHeadWrites       int
	headAttempts                       int
	loserDetail                        string
	committedHead                      bool
}

func (c *campaign) raceRun(n int) (*raceStats, error) {
	ns, err := c.namespace("race")
	if err != nil {
		return nil, err
	}
	dir, err := c.release("v3.0.0", ns, "")
	if err != nil {
		return nil, err
	}
	admin, err := c.adminOptions(filepath.Join(c.work, "receipts", ns))
	if err != nil {
		return nil, err
	}
	pf, err := c.preflight(admin, dir, deploy.TransitionInstall, deploy.ExpectedHead{})
	if err != nil {
		return nil, fmt.Errorf("preflight: %w", err)
	}
	users := make([]string, n)
	cmds := make([]*exec.Cmd, n)
	outs := make([]*bytes.Buffer, n)
	errs := make([]*bytes.Buffer, n)
	for i := range n {
		u, kc, err := c.user("racer", "system:masters")
		if err != nil {
			return nil, err
		}
		users[i] = u
		cmd := exec.Command(c.cfg.Binary, "apply", "--preflight", pf.Path, "--receipts-dir", filepath.Join(c.work, "receipts", u), "-o", "json")
		cmd.Env = append(cleanEnv(), "KUBECONFIG="+kc)
		outs[i], errs[i] = &bytes.Buffer{}, &bytes.Buffer{}
		cmd.Stdout, cmd.Stderr = outs[i], errs[i]
		cmds[i] = cmd
	}
	for _, cmd := range cmds {
		if err := cmd.Start(); err != nil {
			return nil, err
		}
	}
	st := &raceStats{}
	var committer string
	for i, cmd := range cmds {
		code := exitCode(cmd.Wait())
		switch code {
		case 0:
			var res deploy.ApplyResult
			if err := json.Unmarshal(outs[i].Bytes(), &res); err != nil {
				st.other++
				st.otherDetail = fmt.Sprintf("%s: unparsable output %q", users[i], outs[i])
				continue
			}
			if res.Outcome == "committed" {
				st.commits++
				committer = users[i]
			} else {
				st.replays++
			}
		case 3:
			st.conflicts++
		default:
			st.other++
			st.otherDetail = fmt.Sprintf("%s: exit %d: %s", users[i], code, errs[i])
		}
		if code != 0 && errorLines(errs[i].String()) != 1 {
			st.other++
			st.otherDetail = fmt.Sprintf("%s: %d error lines: %s", users[i], errorLines(errs[i].String()), errs[i])
		}
	}
	for _, u := range users {
		if u == committer {
			continue
		}
		evs, err := c.writes(u)
		if err != nil {
			return nil, err
		}
		for _, e := range evs {
			if e.ObjectRef.Resource == "configmaps" && e.ObjectRef.Name == deploy.HeadName {
				st.headAttempts++
			}
		}
		head, work := split(evs)
		st.loserHeadWrites += len(head)
		st.loserWrites += len(work)
		if len(work) > 0 {
			st.loserDetail = u + ": " + describeEvents(work)
		}
	}
	h, err := c.head(ns)
	if err != nil {
		return nil, err
	}
	st.committedHead = h != nil && h.Phase == deploy.PhaseCommitted && h.Generation == 1 && h.Transition.PreflightDigest == pf.Record.SelfDigest
	if committer != "" {
		evs, err := c.writes(committer)
		if err != nil {
			return nil, err
		}
		if _, work := split(evs); len(work) == 0 {
			return nil, fmt.Errorf("the audit log shows no workload write by the committer %s: the evidence is broken", committer)
		}
	}
	return st, nil
}
