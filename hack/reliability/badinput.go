package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/inventory"
)

// badEnv is what the corpus builds on: a namespace with v3.0.0 committed,
// the genuine v3.1.0 release and an upgrade preflight for it, and a second
// namespace whose Head was tampered with after a preflight.
type badEnv struct {
	c         *campaign
	ns        string
	token     string
	v300      string
	v310      string
	pf        string // genuine upgrade preflight for v310
	pfRec     *deploy.PreflightRecord
	rdir      string
	tns       string // namespace with a tampered Head
	tv310     string
	tpf       string // preflight made before the tampering
	installPF string // the install preflight, committed
	serial    atomic.Int64
}

type badCase struct {
	what   string // release, lock, preflight record, flag, Head, receipt
	name   string
	expect int
	prep   func(b *badEnv) ([]string, error)
}

func (b *badEnv) tmp(name string) string {
	return filepath.Join(b.c.work, "bad", fmt.Sprintf("%d-%s", b.serial.Add(1), name))
}

// copyRelease copies a release directory (with its lock) for editing.
// copyReceipts copies the install's receipts directory with edit applied
// to every file, and returns the copy.
func (b *badEnv) copyReceipts(edit func([]byte) []byte) (string, error) {
	dir := b.tmp("receipts")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	entries, err := os.ReadDir(b.rdir)
	if err != nil {
		return "", err
	}
	if len(entries) == 0 {
		return "", fmt.Errorf("no receipts in %s to tamper with", b.rdir)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(b.rdir, e.Name()))
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), edit(data), 0o644); err != nil {
			return "", err
		}
	}
	return dir, nil
}

func (b *badEnv) copyRelease(src string) (string, error) {
	dst := b.tmp(filepath.Base(src))
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return "", err
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), data, 0o644); err != nil {
			return "", err
		}
	}
	return dst, nil
}

// editFile rewrites dir/name through f.
func editFile(dir, name string, f func(string) string) error {
	p := filepath.Join(dir, name)
	data, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	edited := f(string(data))
	if edited == string(data) {
		return fmt.Errorf("the edit of %s changed nothing: the case would run on the genuine input", name)
	}
	return os.WriteFile(p, []byte(edited), 0o644)
}

// upgradeOf runs preflight of an edited copy of v3.1.0.
func upgradeOf(edit func(dir string) error) func(b *badEnv) ([]string, error) {
	return func(b *badEnv) ([]string, error) {
		dir, err := b.copyRelease(b.v310)
		if err != nil {
			return nil, err
		}
		if err := edit(dir); err != nil {
			return nil, err
		}
		return []string{"preflight", dir, "--transition", "upgrade", "--expected-head", b.token, "--out", b.tmp("pf.json")}, nil
	}
}

func lockEdit(f func(string) string) func(b *badEnv) ([]string, error) {
	return upgradeOf(func(dir string) error { return editFile(dir, inventory.LockFile, f) })
}

func releaseEdit(file string, f func(string) string) func(b *badEnv) ([]string, error) {
	return upgradeOf(func(dir string) error { return editFile(dir, file, f) })
}

// flipFirstHex changes the first hex digit after each match of the prefix re
// to another digit, so the digest always differs (replacing it
// by a fixed digit is a no-op when the digest already starts with it).
func flipFirstHex(re string) func(string) string {
	r := regexp.MustCompile(re + `([0-9a-f])`)
	return func(s string) string {
		return r.ReplaceAllStringFunc(s, func(m string) string {
			last := m[len(m)-1]
			flipped := byte('f')
			if last == 'f' {
				flipped = '0'
			}
			return m[:len(m)-1] + string(flipped)
		})
	}
}

func replaceRE(re, with string) func(string) string {
	r := regexp.MustCompile(re)
	return func(s string) string { return r.ReplaceAllString(s, with) }
}

// record writes an edited copy of the genuine preflight record and applies it.
func record(f func(rec *deploy.PreflightRecord) []byte) func(b *badEnv) ([]string, error) {
	return func(b *badEnv) ([]string, error) {
		rec := *b.pfRec
		genuine, err := b.pfRec.Bytes()
		if err != nil {
			return nil, err
		}
		data := f(&rec)
		if bytes.Equal(data, append(genuine, '\n')) {
			return nil, fmt.Errorf("the edit changed nothing: the case would apply the genuine record")
		}
		p := b.tmp("pf.json")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return nil, err
		}
		return []string{"apply", "--preflight", p, "--receipts-dir", b.rdir}, nil
	}
}

// resealed edits the record and seals it again: a well-formed record with
// a wrong content.
func resealedRecord(edit func(rec *deploy.PreflightRecord)) func(b *badEnv) ([]string, error) {
	return record(func(rec *deploy.PreflightRecord) []byte {
		edit(rec)
		_ = rec.Seal()
		data, _ := rec.Bytes()
		return append(data, '\n')
	})
}

func rawRecord(f func(genuine string) string) func(b *badEnv) ([]string, error) {
	return record(func(rec *deploy.PreflightRecord) []byte {
		data, _ := rec.Bytes()
		return []byte(f(string(data) + "\n"))
	})
}

func args(a ...string) func(b *badEnv) ([]string, error) {
	return func(b *badEnv) ([]string, error) {
		out := make([]string, len(a))
		for i, s := range a {
			out[i] = strings.NewReplacer("PF", b.pf, "DIR", b.v310, "TOKEN", b.token, "RDIR", b.rdir, "NS", b.ns, "TMP", b.tmp("x")).Replace(s)
		}
		return out, nil
	}
}

const otherDigest = "sha256:0000000000000000000000000000000000000000000000000000000000000001"

func badCorpus() []badCase {
	return []badCase{
		// Releases and locks: preflight of an edited copy of v3.1.0.
		{"lock", "no lock file", 2, upgradeOf(func(dir string) error { return os.Remove(filepath.Join(dir, inventory.LockFile)) })},
		{"lock", "lock is not YAML", 2, lockEdit(func(string) string { return "{{{ not yaml" })},
		{"lock", "lock is empty", 2, lockEdit(func(string) string { return "" })},
		{"lock", "lock has an unknown field", 2, lockEdit(func(s string) string { return s + "approvedBy: me\n" })},
		{"lock", "lock schema wrong", 2, lockEdit(replaceRE(`schema: kubectl-ql3/lock@v1`, "schema: kubectl-ql3/lock@v2"))},
		{"lock", "lock version not SemVer", 2, lockEdit(replaceRE(`version: 3\.1\.0`, "version: v3.1"))},
		{"lock", "lock render digest altered", 2, lockEdit(flipFirstHex(`render:\n  digest: sha256:`))},
		{"lock", "lock source digest altered", 2, lockEdit(flipFirstHex(`source:\n  digest: sha256:`))},
		{"lock", "lock inventory count altered", 2, lockEdit(replaceRE(`count: \d+`, "count: 3"))},
		{"lock", "lock image removed", 2, lockEdit(replaceRE(`(?m)^images:\n  - [^\n]*\n`, "images:\n"))},
		{"lock", "lock bound to another cluster", 2, lockEdit(replaceRE(`clusterIdentity: sha256:[0-9a-f]+`, "clusterIdentity: "+otherDigest))},
		{"lock", "lock tool constraint not met", 2, lockEdit(replaceRE(`constraint: '[^']*'`, "constraint: '>=9.0.0'"))},
		{"lock", "lock field manager changed", 2, lockEdit(replaceRE(`fieldManager: kubectl-ql3`, "fieldManager: someone-else"))},
		{"lock", "lock target namespace changed", 2, lockEdit(replaceRE(`(target:\n  clusterIdentity: [^\n]*\n  namespace: )\S+`, "${1}elsewhere"))},
		{"lock", "lock roles incomplete", 2, lockEdit(replaceRE(`roles: \[[^\]]*\]`, "roles: [admin, control]"))},
		{"release", "release file edited after the lock", 2, releaseEdit("config.yaml", func(s string) string { return strings.Replace(s, "queue: ql3-tasks", "queue: other", 1) })},
		{"release", "image by tag only", 2, releaseEdit("control.yaml", replaceRE(`image: registry.k8s.io/pause:3.10@sha256:[0-9a-f]+`, "image: registry.k8s.io/pause:3.10"))},
		{"release", "a role's workload missing", 2, releaseEdit("kustomization.yaml", func(s string) string { return strings.Replace(s, "- worker.yaml\n", "", 1) })},
		{"release", "duplicate object", 2, upgradeOf(func(dir string) error {
			if err := os.WriteFile(filepath.Join(dir, "dup.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ql3-config\ndata: {a: b}\n"), 0o644); err != nil {
				return err
			}
			return editFile(dir, "kustomization.yaml", func(s string) string { return strings.Replace(s, "resources:\n", "resources:\n- dup.yaml\n", 1) })
		})},
		{"release", "kustomization is not YAML", 2, releaseEdit("kustomization.yaml", func(string) string { return "resources: [\n" })},
		{"release", "kustomization names a missing file", 2, releaseEdit("kustomization.yaml", func(s string) string { return strings.Replace(s, "resources:\n", "resources:\n- missing.yaml\n", 1) })},
		{"release", "a Secret with data", 2, upgradeOf(func(dir string) error {
			if err := os.WriteFile(filepath.Join(dir, "secret.yaml"), []byte("apiVersion: v1\nkind: Secret\nmetadata:\n  name: ql3-token\nstringData: {token: hunter2}\n"), 0o644); err != nil {
				return err
			}
			return editFile(dir, "kustomization.yaml", func(s string) string { return strings.Replace(s, "resources:\n", "resources:\n- secret.yaml\n", 1) })
		})},
		{"release", "release directory does not exist", 2, args("preflight", "/nonexistent/release", "--transition", "upgrade", "--expected-head", "TOKEN", "--out", "TMP")},
		{"release", "release directory is a file", 2, args("preflight", "PF", "--transition", "upgrade", "--expected-head", "TOKEN", "--out", "TMP")},
		{"release", "upgrade to the same version", 2, func(b *badEnv) ([]string, error) {
			return []string{"preflight", b.v300, "--transition", "upgrade", "--expected-head", b.token, "--out", b.tmp("pf")}, nil
		}},
		{"release", "upgrade to a lower version", 2, func(b *badEnv) ([]string, error) {
			dir, err := b.c.release("v3.1.0", b.ns, "2.9.0")
			return []string{"preflight", dir, "--transition", "upgrade", "--expected-head", b.token, "--out", b.tmp("pf")}, err
		}},
		{"release", "upgrade that drops a live object", 2, func(b *badEnv) ([]string, error) {
			dir, err := b.c.release("v3.1.0-drop", b.ns, "3.1.0")
			return []string{"preflight", dir, "--transition", "upgrade", "--expected-head", b.token, "--out", b.tmp("pf")}, err
		}},
		{"release", "install onto an existing Head", 2, args("preflight", "DIR", "--transition", "install", "--expected-head", "TOKEN", "--out", "TMP")},
		{"release", "rollback with no previous deployment", 2, args("preflight", "DIR", "--transition", "rollback", "--expected-head", "TOKEN", "--out", "TMP")},
		{"release", "rollback command with no previous deployment", 2, args("rollback", "DIR", "--expected-head", "TOKEN", "--out", "TMP", "--receipts-dir", "RDIR")},

		// Preflight records: apply of an edited copy of the genuine record.
		{"preflight record", "record file missing", 2, args("apply", "--preflight", "/nonexistent/pf.json")},
		{"preflight record", "record is a directory", 2, args("apply", "--preflight", "RDIR/..")},
		{"preflight record", "record empty", 2, rawRecord(func(string) string { return "" })},
		{"preflight record", "record not JSON", 2, rawRecord(func(string) string { return "preflight: yes\n" })},
		{"preflight record", "record is a JSON array", 2, rawRecord(func(string) string { return "[]\n" })},
		{"preflight record", "record is null", 2, rawRecord(func(string) string { return "null\n" })},
		{"preflight record", "record truncated", 2, rawRecord(func(s string) string { return s[:len(s)/2] })},
		{"preflight record", "record with an unknown field", 2, rawRecord(func(s string) string { return strings.Replace(s, `{"command"`, `{"approvedBy":"me","command"`, 1) })},
		{"preflight record", "record edited, digests kept", 2, rawRecord(func(s string) string { return strings.Replace(s, `"forceConflicts":false`, `"forceConflicts":true`, 1) })},
		{"preflight record", "record pretty-printed", 2, rawRecord(func(s string) string { return strings.Replace(s, `,"`, ", \"", -1) })},
		{"preflight record", "record with two trailing newlines", 2, rawRecord(func(s string) string { return s + "\n" })},
		{"preflight record", "record with a duplicate field", 2, rawRecord(func(s string) string { return strings.Replace(s, `{"command"`, `{"schema":"x","command"`, 1) })},
		{"preflight record", "re-sealed: schema", 2, resealedRecord(func(r *deploy.PreflightRecord) { r.Schema = "qinglong/preflight@v0" })},
		{"preflight record", "re-sealed: transition destroy", 2, resealedRecord(func(r *deploy.PreflightRecord) { r.Command.Transition = "destroy" })},
		{"preflight record", "re-sealed: command and release disagree", 2, resealedRecord(func(r *deploy.PreflightRecord) { r.Command.Version = "9.9.9" })},
		{"preflight record", "re-sealed: command and target disagree", 2, resealedRecord(func(r *deploy.PreflightRecord) { r.Command.Namespace = "elsewhere" })},
		{"preflight record", "re-sealed: release dir missing", 2, resealedRecord(func(r *deploy.PreflightRecord) { r.Release.Dir = "/nonexistent/release" })},
		{"preflight record", "re-sealed: release source digest", 2, resealedRecord(func(r *deploy.PreflightRecord) { r.Release.SourceDigest = otherDigest })},
		{"preflight record", "re-sealed: another cluster", 2, resealedRecord(func(r *deploy.PreflightRecord) {
			r.Target.ClusterIdentity, r.Command.ClusterIdentity = otherDigest, otherDigest
		})},
		{"preflight record", "re-sealed: field manager", 2, resealedRecord(func(r *deploy.PreflightRecord) { r.Command.FieldManager = "someone-else" })},
		{"preflight record", "re-sealed: identity step not a digest", 2, resealedRecord(func(r *deploy.PreflightRecord) { r.Steps.Identity = "ok" })},
		{"preflight record", "release changed after the preflight", 2, func(b *badEnv) ([]string, error) {
			dir, err := b.copyRelease(b.v310)
			if err != nil {
				return nil, err
			}
			if err := editFile(dir, "config.yaml", func(s string) string { return strings.Replace(s, "queue: ql3-tasks", "queue: other", 1) }); err != nil {
				return nil, err
			}
			return []string{"apply", "--preflight", b.pf, "--receipts-dir", b.rdir, dir}, nil
		}},

		// Flags.
		{"flag", "--parallelism 0", 2, args("apply", "--preflight", "PF", "--parallelism", "0")},
		{"flag", "--parallelism 1000", 2, args("apply", "--preflight", "PF", "--parallelism", "1000")},
		{"flag", "--parallelism abc", 2, args("apply", "--preflight", "PF", "--parallelism", "abc")},
		{"flag", "--qps 0", 2, args("apply", "--preflight", "PF", "--qps", "0")},
		{"flag", "--burst 0", 2, args("resume", "--preflight", "PF", "--burst", "0")},
		{"flag", "--timeout 0s", 2, args("apply", "--preflight", "PF", "--timeout", "0s")},
		{"flag", "--timeout -5s", 2, args("apply", "--preflight", "PF", "--timeout=-5s")},
		{"flag", "--timeout five", 2, args("apply", "--preflight", "PF", "--timeout", "five")},
		{"flag", "-o xml", 2, args("apply", "--preflight", "PF", "-o", "xml")},
		{"flag", "--transition destroy", 2, args("preflight", "DIR", "--transition", "destroy", "--expected-head", "TOKEN")},
		{"flag", "--expected-head garbage", 2, args("preflight", "DIR", "--transition", "upgrade", "--expected-head", "garbage")},
		{"flag", "--expected-head short digest", 2, args("preflight", "DIR", "--transition", "upgrade", "--expected-head", "ql3h1-1-"+strings.Repeat("a", 63)+"-"+strings.Repeat("a", 64)+"-"+strings.Repeat("a", 64))},
		{"flag", "--expected-head generation 0 with digests", 2, args("preflight", "DIR", "--transition", "upgrade", "--expected-head", "ql3h1-0-"+strings.Repeat("a", 64)+"-"+strings.Repeat("a", 64)+"-"+strings.Repeat("a", 64))},
		{"flag", "apply without --preflight", 2, args("apply", "--receipts-dir", "RDIR")},
		{"flag", "preflight without --transition", 2, args("preflight", "DIR", "--expected-head", "TOKEN")},
		{"flag", "preflight without --expected-head", 2, args("preflight", "DIR", "--transition", "upgrade")},
		{"flag", "unknown flag", 2, args("apply", "--preflight", "PF", "--yes-really")},
		{"flag", "preflight with two directories", 2, args("preflight", "DIR", "DIR", "--transition", "upgrade", "--expected-head", "TOKEN")},
		{"flag", "apply with two directories", 2, args("apply", "--preflight", "PF", "DIR", "DIR")},
		{"flag", "resume with two directories", 2, args("resume", "--preflight", "PF", "DIR", "DIR")},
		{"flag", "--sign-key missing", 2, args("apply", "--preflight", "PF", "--sign-key", "/nonexistent/key.pem")},
		{"flag", "--sign-key not a key", 2, args("apply", "--preflight", "PF", "--sign-key", "PF")},
		{"flag", "--secret-digest-key-file without --allow-secret-data", 2, args("apply", "--preflight", "PF", "--secret-digest-key-file", "PF")},
		{"flag", "--kubeconfig missing", 2, args("apply", "--preflight", "PF", "--kubeconfig", "/nonexistent/kubeconfig")},
		{"flag", "--context unknown", 2, args("apply", "--preflight", "PF", "--context", "nope")},
		{"flag", "head -o xml", 2, args("head", "-n", "NS", "-o", "xml")},
		{"flag", "head with an argument", 2, args("head", "NS")},
		{"flag", "rollback without a directory", 2, args("rollback", "--expected-head", "TOKEN")},
		{"flag", "rollback --expected-head garbage", 2, args("rollback", "DIR", "--expected-head", "garbage")},
		{"flag", "--receipts-dir is a file", 2, args("apply", "--preflight", "PF", "--receipts-dir", "PF")},
		{"flag", "receipt audit of a missing path", 2, args("receipt", "audit", "/nonexistent/receipts")},
		{"flag", "receipt audit without a path", 2, args("receipt", "audit")},

		// Heads: a tampered Head stops every command that reads it.
		{"Head", "head on a tampered Head", 5, func(b *badEnv) ([]string, error) { return []string{"head", "-n", b.tns}, nil }},
		{"Head", "preflight on a tampered Head", 5, func(b *badEnv) ([]string, error) {
			return []string{"preflight", b.tv310, "--transition", "upgrade", "--expected-head", b.token, "--out", b.tmp("pf")}, nil
		}},
		{"Head", "apply on a tampered Head", 5, func(b *badEnv) ([]string, error) {
			return []string{"apply", "--preflight", b.tpf, "--receipts-dir", b.tmp("r")}, nil
		}},
		{"Head", "resume on a tampered Head", 5, func(b *badEnv) ([]string, error) {
			return []string{"resume", "--preflight", b.tpf, "--receipts-dir", b.tmp("r")}, nil
		}},
		{"Head", "rollback on a tampered Head", 5, func(b *badEnv) ([]string, error) {
			return []string{"rollback", b.tv310, "--expected-head", b.token, "--out", b.tmp("pf"), "--receipts-dir", b.tmp("r")}, nil
		}},

		// Receipts.
		{"receipt", "audit of a tampered receipt", 5, func(b *badEnv) ([]string, error) {
			dir, err := b.copyReceipts(func(data []byte) []byte {
				return []byte(strings.Replace(string(data), `"generation":1`, `"generation":2`, 1))
			})
			if err != nil {
				return nil, err
			}
			return []string{"receipt", "audit", dir}, nil
		}},
		{"receipt", "replay onto a diverged local receipt", 5, func(b *badEnv) ([]string, error) {
			// The install's receipt, edited: the replay of the committed
			// install must refuse to accept or replace it.
			dir, err := b.copyReceipts(func(data []byte) []byte { return append(data, ' ') })
			if err != nil {
				return nil, err
			}
			return []string{"apply", "--preflight", b.installPF, "--receipts-dir", dir}, nil
		}},
	}
}

// caseBadInput: every corpus entry gets its exit code, "error: " once on
// stderr, and no write to the cluster by its user (audit log).
func caseBadInput(c *campaign, cs *caseState) []Row {
	row := Row{Case: "bad input", Expected: "exit 2 (invalid) or 5 (tamper) as listed, `error: ` once on stderr, 0 cluster writes by that user"}
	b, err := c.badEnv()
	if err != nil {
		cs.failf("setup: %v", err)
		return []Row{row}
	}
	corpus := badCorpus()
	var idx []int
	for i := range corpus {
		if !c.cfg.Quick || i%5 == 0 {
			idx = append(idx, i)
		}
	}
	row.Runs = len(idx)
	var mu sync.Mutex
	byWhat := map[string][2]int{}
	var ok atomic.Int64
	c.parallel(len(idx), func(k int) {
		bc := corpus[idx[k]]
		err := c.badRun(b, bc)
		mu.Lock()
		defer mu.Unlock()
		w := byWhat[bc.what]
		w[0]++
		if err != nil {
			cs.failf("%s %q: %v", bc.what, bc.name, err)
		} else {
			w[1]++
			ok.Add(1)
		}
		byWhat[bc.what] = w
	})
	var parts []string
	for _, w := range []string{"release", "lock", "preflight record", "flag", "Head", "receipt"} {
		if v, found := byWhat[w]; found {
			parts = append(parts, fmt.Sprintf("%d/%d %ss", v[1], v[0], w))
		}
	}
	row.Observed = fmt.Sprintf("%d/%d as expected (%s); 0 cluster writes by their users", ok.Load(), row.Runs, strings.Join(parts, ", "))
	row.Pass = ok.Load() == int64(row.Runs)
	row.Details = map[string]any{"corpus": len(corpus)}
	return []Row{row}
}

func (c *campaign) badRun(b *badEnv, bc badCase) error {
	a, err := bc.prep(b)
	if err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	user, kc, err := c.user("bad", "system:masters")
	if err != nil {
		return err
	}
	r := c.runBinary(kc, nil, a...)
	var problems []string
	if r.code != bc.expect {
		problems = append(problems, fmt.Sprintf("exit %d, want %d", r.code, bc.expect))
	}
	if n := errorLines(r.stderr); n != 1 {
		problems = append(problems, fmt.Sprintf("%d `error: ` lines on stderr", n))
	}
	evs, err := c.writes(user)
	if err != nil {
		return err
	}
	if len(evs) > 0 {
		problems = append(problems, fmt.Sprintf("%d cluster write(s): %s", len(evs), describeEvents(evs)))
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s (kubectl ql3 %s): %s", strings.Join(problems, "; "), strings.Join(a, " "), strings.TrimSpace(r.stderr))
	}
	return nil
}

func (c *campaign) badEnv() (*badEnv, error) {
	b := &badEnv{c: c}
	var err error
	if b.ns, err = c.namespace("bad"); err != nil {
		return nil, err
	}
	b.rdir = filepath.Join(c.work, "receipts", b.ns)
	o, err := c.adminOptions(b.rdir)
	if err != nil {
		return nil, err
	}
	if b.v300, err = c.release("v3.0.0", b.ns, ""); err != nil {
		return nil, err
	}
	pf0, err := c.preflight(o, b.v300, deploy.TransitionInstall, deploy.ExpectedHead{})
	if err != nil {
		return nil, err
	}
	b.installPF = pf0.Path
	res, err := deploy.RunApply(context.Background(), o, deploy.ApplyRequest{Preflight: pf0.Record})
	if err != nil {
		return nil, err
	}
	b.token = res.Head.Expected().String()
	if b.v310, err = c.release("v3.1.0", b.ns, ""); err != nil {
		return nil, err
	}
	pf, err := c.preflight(o, b.v310, deploy.TransitionUpgrade, res.Head.Expected())
	if err != nil {
		return nil, err
	}
	b.pf, b.pfRec = pf.Path, pf.Record
	// The tampered namespace.
	if b.tns, err = c.namespace("badhead"); err != nil {
		return nil, err
	}
	to, err := c.adminOptions(filepath.Join(c.work, "receipts", b.tns))
	if err != nil {
		return nil, err
	}
	tv300, err := c.release("v3.0.0", b.tns, "")
	if err != nil {
		return nil, err
	}
	tres, err := c.deploy(to, tv300, deploy.TransitionInstall, deploy.ExpectedHead{})
	if err != nil {
		return nil, err
	}
	if b.tv310, err = c.release("v3.1.0", b.tns, ""); err != nil {
		return nil, err
	}
	tpf, err := c.preflight(to, b.tv310, deploy.TransitionUpgrade, tres.Head.Expected())
	if err != nil {
		return nil, err
	}
	b.tpf = tpf.Path
	cms := c.admin.CoreV1().ConfigMaps(b.tns)
	cm, err := cms.Get(context.Background(), deploy.HeadName, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	cm.Labels["edited-by"] = "hand"
	if _, err := cms.Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
		return nil, err
	}
	return b, nil
}
