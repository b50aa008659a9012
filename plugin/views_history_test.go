package plugin_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/qinglong/kubectl-ql3/ceremony/views"
	"github.com/qinglong/kubectl-ql3/receipts"
)

// deployTwice installs v3.0.0 and upgrades to v3.1.0 in a fresh namespace,
// publishing the receipts to a directory; it returns the namespace, the
// receipts directory and the two receipt files.
func deployTwice(t *testing.T) (ns, rdir, gen1, gen2 string) {
	t.Helper()
	ns = controlNamespace(t)
	v300, v310 := releaseCopy(t, "v3.0.0", ns, ""), releaseCopy(t, "v3.1.0", ns, "")
	work := t.TempDir()
	rdir = filepath.Join(work, "receipts")
	for i, step := range []struct{ dir, kind string }{{v300, "install"}, {v310, "upgrade"}} {
		pf := filepath.Join(work, step.kind+".json")
		mustRun(t, nil, "preflight", step.dir, "--transition", step.kind, "--expected-head", headToken(t, nil, ns), "--out", pf)
		mustRun(t, nil, "apply", "--preflight", pf, "--receipts-dir", rdir)
		if i == 0 {
			gen1 = filepath.Join(rdir, "000001-install-3.0.0.receipt.json")
		}
	}
	gen2 = filepath.Join(rdir, "000002-upgrade-3.1.0.receipt.json")
	for _, f := range []string{gen1, gen2} {
		if _, err := os.Stat(f); err != nil {
			t.Fatal(err)
		}
	}
	return ns, rdir, gen1, gen2
}

// history says exactly what is wrong (issue #22 item 9): the newest
// receipt missing while the Head is at its generation, and one byte of
// the install receipt altered.
func TestCLIHistoryExact(t *testing.T) {
	ns, rdir, gen1, gen2 := deployTwice(t)

	// The newest receipt is missing; the Head is committed at generation 2.
	aside := filepath.Join(t.TempDir(), filepath.Base(gen2))
	if err := os.Rename(gen2, aside); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := run(t, nil, "history", rdir, "-n", ns)
	t.Logf("history with the newest receipt missing:\n%s%s", out, stderr)
	if code != 5 || !strings.Contains(stderr, "does not verify") {
		t.Fatalf("exit %d, want 5", code)
	}
	for _, want := range []string{"chain: FAIL\n", "generation 2, at which the Head is committed, has no receipt here",
		"head: " + ns + " at generation 2 (committed), no receipt here is the Head's\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("history does not say %q", want)
		}
	}
	for _, wrong := range []string{"chain: ok", "marked *", "has passed"} {
		if strings.Contains(out, wrong) {
			t.Errorf("history says %q", wrong)
		}
	}
	out, _, _ = run(t, nil, "history", rdir, "-n", ns, "-o", "json")
	var hist views.HistoryReport
	if err := json.Unmarshal([]byte(out), &hist); err != nil || hist.Chain.Verdict != receipts.VerdictFail || hist.Head == nil || hist.Head.Marked ||
		len(hist.Head.MissingLocally) != 1 || hist.Head.MissingLocally[0] != 2 {
		t.Errorf("history -o json with the newest receipt missing: %v\n%s", err, out)
	}
	if err := os.Rename(aside, gen2); err != nil {
		t.Fatal(err)
	}

	// One byte of the install receipt altered: its row names the file
	// and the audit's reason (as receipt audit reports it), and the chain
	// does not call generation 1 missing.
	good, err := os.ReadFile(gen1)
	if err != nil {
		t.Fatal(err)
	}
	altered := strings.Replace(string(good), `"version":"3.0.0"`, `"version":"3.0.1"`, 1)
	if altered == string(good) {
		t.Fatalf("%s has no \"version\":\"3.0.0\"", gen1)
	}
	if err := os.WriteFile(gen1, []byte(altered), 0o644); err != nil {
		t.Fatal(err)
	}
	auditOut, _, _ := run(t, nil, "receipt", "audit", rdir, "-o", "json")
	var audit receipts.Report
	if err := json.Unmarshal([]byte(auditOut), &audit); err != nil {
		t.Fatal(err)
	}
	var reason string
	for _, row := range audit.Receipts {
		if filepath.Base(row.File) == filepath.Base(gen1) && len(row.Reasons) > 0 {
			reason = strings.Join(row.Reasons, "; ")
		}
	}
	if reason == "" {
		t.Fatalf("receipt audit gives no reason for %s:\n%s", gen1, auditOut)
	}
	out, stderr, code = run(t, nil, "history", rdir, "-n", ns)
	t.Logf("history with one byte of the install receipt altered:\n%s%s", out, stderr)
	if code != 5 {
		t.Fatalf("exit %d, want 5", code)
	}
	for _, want := range []string{
		filepath.Base(gen1) + ": FAIL: " + reason + "\n",
		`generation 1 is in "` + filepath.Base(gen1) + `", which does not verify`,
		"2 *", "head: " + ns + " at generation 2 (committed), marked *\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("history does not say %q", want)
		}
	}
	for _, wrong := range []string{"generation 1 is missing", "\n0 ", "chain: ok"} {
		if strings.Contains(out, wrong) {
			t.Errorf("history says %q", wrong)
		}
	}
	if err := os.WriteFile(gen1, good, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, stderr, code := run(t, nil, "history", rdir, "-n", ns); code != 0 || !strings.Contains(out, "chain: ok\n") || !strings.Contains(out, "marked *") {
		t.Fatalf("history of the restored directory: exit %d\n%s%s", code, out, stderr)
	}
}

// history prints what the audit verified (issue #22 item 6): each receipt
// file is opened once, by the audit's bounded read, and its row shows the
// receipt parsed from those bytes; nothing reads the file a second time.
// The opens are counted by the kernel (inotify IN_OPEN on the file).
func TestCLIHistoryShowsAuditedBytes(t *testing.T) {
	_, rdir, gen1, _ := deployTwice(t)
	good, err := os.ReadFile(gen1)
	if err != nil {
		t.Fatal(err)
	}
	r1, err := receipts.Parse(good)
	if err != nil {
		t.Fatal(err)
	}
	fd, err := syscall.InotifyInit1(syscall.IN_NONBLOCK | syscall.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	// IN_CLOSE_NOWRITE too: the kernel merges an event identical to the
	// one queued before it, so two opens in a row would count as one.
	if _, err := syscall.InotifyAddWatch(fd, gen1, syscall.IN_OPEN|syscall.IN_CLOSE_NOWRITE); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := run(t, nil, "history", rdir, "-o", "json")
	opens := 0
	buf := make([]byte, 64*syscall.SizeofInotifyEvent)
	for {
		n, err := syscall.Read(fd, buf)
		if err != nil || n <= 0 {
			break // EAGAIN: every event of the finished run has been read
		}
		for off := 0; off+syscall.SizeofInotifyEvent <= n; {
			ev := (*syscall.InotifyEvent)(unsafe.Pointer(&buf[off]))
			if ev.Mask&syscall.IN_OPEN != 0 {
				opens++
			}
			off += syscall.SizeofInotifyEvent + int(ev.Len)
		}
	}
	var hist views.HistoryReport
	if code != 0 || json.Unmarshal([]byte(out), &hist) != nil || len(hist.Entries) != 2 {
		t.Fatalf("history: exit %d\n%s%s", code, out, stderr)
	}
	if opens != 1 {
		t.Errorf("history opened the install receipt %d times; want once (the audit's bounded read)", opens)
	}
	if e := hist.Entries[0]; e.Generation != 1 || e.Inventory != len(r1.Inventory) || e.ToolVersion != r1.Tool.Version || e.SelfDigest != r1.SelfDigest {
		t.Errorf("install row %+v: want the audited receipt's", e)
	}
}
