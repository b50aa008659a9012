package receipts

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

// failures is every reason in rep, one string.
func failures(rep *Report) string {
	var all []string
	for _, row := range rep.Receipts {
		for _, r := range row.Reasons {
			all = append(all, row.File+": "+r)
		}
	}
	all = append(all, rep.Chain.Reasons...)
	if rep.Release != nil {
		all = append(all, rep.Release.Reasons...)
	}
	return strings.Join(all, "\n")
}

func mustAudit(t *testing.T, paths []string, opts AuditOptions) *Report {
	t.Helper()
	rep, err := Audit(paths, opts)
	if err != nil {
		t.Fatalf("audit: %v", err)
	}
	if rep.Note != Note(len(opts.TrustedKeys) > 0) || !strings.Contains(rep.Note, "does not prove that the Head is still") {
		t.Fatalf("report does not state its offline limit: %q", rep.Note)
	}
	if signed := strings.Contains(rep.Note, "Trusted keys were given"); signed != (len(opts.TrustedKeys) > 0) || signed == strings.Contains(rep.Note, "shows nothing of who wrote them") {
		t.Fatalf("the note %q says signed %v; trusted keys: %d", rep.Note, signed, len(opts.TrustedKeys))
	}
	return rep
}

func TestAuditChain(t *testing.T) {
	dir := t.TempDir()
	rs := chain(t, 8, 5)
	writeChain(t, dir, rs)
	rep := mustAudit(t, []string{dir}, AuditOptions{})
	if !rep.OK() || len(rep.Receipts) != 8 || rep.Chain.FromGeneration != 1 || rep.Chain.ToGeneration != 8 {
		t.Fatalf("clean chain: %+v\n%s", rep.Chain, failures(rep))
	}
	for i, row := range rep.Receipts {
		if row.Generation != int64(i+1) || row.Verdict != VerdictOK || row.Signature != SignatureNone {
			t.Errorf("row %d: %+v", i, row)
		}
	}
	// Files given one by one, in any order, and twice, audit the same.
	var files []string
	for _, r := range rs {
		files = append([]string{filepath.Join(dir, FileName(r))}, files...)
	}
	if rep := mustAudit(t, append(files, dir), AuditOptions{}); !rep.OK() || len(rep.Receipts) != 8 {
		t.Fatalf("files: %s", failures(rep))
	}
}

func TestAuditDetects(t *testing.T) {
	rs := chain(t, 6, 4)
	other := chain(t, 6, 5) // another history: same names, other content
	tests := []struct {
		name    string
		setup   func(t *testing.T, dir string)
		opts    AuditOptions
		wantErr string
	}{
		{"receipt removed from the middle", func(t *testing.T, dir string) {
			_ = os.Remove(filepath.Join(dir, FileName(rs[2])))
		}, AuditOptions{}, "generation 3 is missing"},
		{"several removed", func(t *testing.T, dir string) {
			_ = os.Remove(filepath.Join(dir, FileName(rs[2])))
			_ = os.Remove(filepath.Join(dir, FileName(rs[3])))
		}, AuditOptions{}, "generations 3 to 4 are missing"},
		{"one byte of a receipt altered: named, not called missing", func(t *testing.T, dir string) {
			p := filepath.Join(dir, FileName(rs[2]))
			data := mustRead(t, p)
			_ = os.WriteFile(p, bytes.Replace(data, []byte(rs[2].Deployment.Version), []byte("9"+rs[2].Deployment.Version[1:]), 1), 0o644)
		}, AuditOptions{}, `generation 3 is in "` + FileName(rs[2]) + `", which does not verify (see its row)`},
		{"first removed", func(t *testing.T, dir string) {
			_ = os.Remove(filepath.Join(dir, FileName(rs[0])))
		}, AuditOptions{}, "generation 1 is missing; the history starts at generation 1"},
		{"contents swapped", func(t *testing.T, dir string) {
			a, b := filepath.Join(dir, FileName(rs[1])), filepath.Join(dir, FileName(rs[2]))
			da, _ := os.ReadFile(a)
			db, _ := os.ReadFile(b)
			_ = os.WriteFile(a, db, 0o644)
			_ = os.WriteFile(b, da, 0o644)
		}, AuditOptions{}, "does not match its content"},
		{"receipt replaced by another history's", func(t *testing.T, dir string) {
			_ = os.WriteFile(filepath.Join(dir, FileName(rs[3])), mustBytes(t, other[3]), 0o644)
		}, AuditOptions{}, "generation 4: previousReceiptDigest"},
		{"duplicate generation", func(t *testing.T, dir string) {
			b := following(rs[2], KindUpgrade, "9.0.0").sealed(t)
			writeChain(t, dir, []*Receipt{b})
		}, AuditOptions{}, "generation 4 appears twice"},
		{"other target", func(t *testing.T, dir string) {
			b := following(rs[5], KindUpgrade, "9.0.0").with(func(r *Receipt) { r.Target.Namespace = "elsewhere" }).sealed(t)
			writeChain(t, dir, []*Receipt{b})
		}, AuditOptions{}, `targets cluster`},
		{"previous deployment rewritten", func(t *testing.T, dir string) {
			b := following(rs[5], KindUpgrade, "9.0.0").with(func(r *Receipt) { r.PreviousDeployment.LockDigest = td("x") }).sealed(t)
			writeChain(t, dir, []*Receipt{b})
		}, AuditOptions{}, "generation 7: previousDeployment is not generation 6's deployment"},
		{"rollback to something else", func(t *testing.T, dir string) {
			_ = os.Remove(filepath.Join(dir, FileName(rs[3])))
			b := following(rs[2], KindRollback, "").with(func(r *Receipt) {
				r.Deployment = rs[2].Deployment
				r.Deployment.Version = "3.0.5"
				r.Deployment.LockDigest = td("lock-3.0.5")
			}).sealed(t)
			writeChain(t, dir, []*Receipt{b})
			for _, r := range rs[4:] {
				_ = os.Remove(filepath.Join(dir, FileName(r)))
			}
		}, AuditOptions{}, "generation 4: rollback, but its deployment is not generation 3's previous deployment"},
		{"orphan signature", func(t *testing.T, dir string) {
			p := filepath.Join(dir, FileName(rs[5]))
			_ = os.WriteFile(p+".sig", mustSign(t, rs[5], testKey(1)), 0o644)
			_ = os.Remove(p)
		}, AuditOptions{}, "has no receipt beside it"},
		{"malformed signature", func(t *testing.T, dir string) {
			_ = os.WriteFile(filepath.Join(dir, FileName(rs[1])+".sig"), []byte("{}"), 0o644)
		}, AuditOptions{}, `signature field "schema"`},
		{"signature of another receipt", func(t *testing.T, dir string) {
			_ = os.WriteFile(filepath.Join(dir, FileName(rs[1])+".sig"), mustSign(t, rs[2], testKey(1)), 0o644)
		}, AuditOptions{}, "signature is for receipt"},
		{"unsigned with trusted keys", func(t *testing.T, dir string) {}, AuditOptions{TrustedKeys: trusted(1)}, "a signature by a trusted key is required"},
		{"signed by an untrusted key", func(t *testing.T, dir string) { signAll(t, dir, rs, testKey(2)) }, AuditOptions{TrustedKeys: trusted(1)}, "is not a trusted key"},
		{"forged signature", func(t *testing.T, dir string) {
			signAll(t, dir, rs, testKey(1))
			p := filepath.Join(dir, FileName(rs[4])+".sig")
			s, _ := ParseSignature(mustRead(t, p))
			s.Signature = s.Signature[:10] + flipB64(s.Signature[10]) + s.Signature[11:]
			_ = os.WriteFile(p, mustCanonical(t, s), 0o644)
		}, AuditOptions{TrustedKeys: trusted(1)}, "does not verify"},
		{"truncated history without base", func(t *testing.T, dir string) {
			_ = os.Remove(filepath.Join(dir, FileName(rs[0])))
			_ = os.Remove(filepath.Join(dir, FileName(rs[1])))
		}, AuditOptions{}, "generations 1 to 2 are missing"},
		{"base above the first receipt", func(t *testing.T, dir string) {}, AuditOptions{BaseGeneration: 2}, "generation 1 precedes the first generation 2"},
		{"release lock differs", func(t *testing.T, dir string) {}, AuditOptions{Release: release(td("lock-9"), rs[5].Deployment.InventoryDigest)}, "release lock digest"},
		{"release inventory differs", func(t *testing.T, dir string) {}, AuditOptions{Release: release(rs[5].Deployment.LockDigest, td("inv"))}, "release inventory digest"},
		{"release is an older one", func(t *testing.T, dir string) {}, AuditOptions{Release: release(rs[4].Deployment.LockDigest, rs[4].Deployment.InventoryDigest)}, "of generation 6"},
		// Members the Head derives from the others (§2.4), forged with the
		// self digest recomputed: only the recomputation can tell.
		{"deployment digest not derived from the receipt", func(t *testing.T, dir string) {
			r := *rs[5]
			r.Head.DeploymentDigest = rs[4].Head.DeploymentDigest
			_ = os.WriteFile(filepath.Join(dir, FileName(rs[5])), forge(t, &r), 0o644)
		}, AuditOptions{}, "head.deploymentDigest"},
		{"identity step of another cluster", func(t *testing.T, dir string) {
			r := *rs[5]
			r.Steps.FinalIdentity, _ = IdentityStepDigest(canon.ClusterIdentity("another-kube-system-uid"))
			_ = os.WriteFile(filepath.Join(dir, FileName(rs[5])), forge(t, &r), 0o644)
		}, AuditOptions{}, "steps.finalIdentity"},
		{"unreadable receipt", func(t *testing.T, dir string) {
			_ = os.WriteFile(filepath.Join(dir, "000007-upgrade-9.0.0.receipt.json"), []byte("{"), 0o644)
		}, AuditOptions{}, "receipt is not a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeChain(t, dir, rs)
			tt.setup(t, dir)
			rep := mustAudit(t, []string{dir}, tt.opts)
			if rep.OK() || rep.Verdict != VerdictFail {
				t.Fatalf("audit passed")
			}
			if got := failures(rep); !strings.Contains(got, tt.wantErr) {
				t.Fatalf("reasons do not mention %q:\n%s", tt.wantErr, got)
			}
		})
	}
}

func TestAuditPasses(t *testing.T) {
	rs := chain(t, 6, 4)
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string) []string
		opts  AuditOptions
		check func(t *testing.T, rep *Report)
	}{
		{"signed by a trusted key", func(t *testing.T, dir string) []string {
			signAll(t, dir, rs, testKey(1))
			return []string{dir}
		}, AuditOptions{TrustedKeys: trusted(2, 1)}, func(t *testing.T, rep *Report) {
			for _, row := range rep.Receipts {
				if row.Signature != SignatureVerified || row.SignatureKey == "" {
					t.Errorf("row %+v", row)
				}
			}
		}},
		{"signed, no trusted key given", func(t *testing.T, dir string) []string {
			signAll(t, dir, rs, testKey(1))
			return []string{dir}
		}, AuditOptions{}, func(t *testing.T, rep *Report) {
			if rep.Receipts[0].Signature != SignatureUnverified {
				t.Errorf("row %+v", rep.Receipts[0])
			}
		}},
		{"truncated history with base", func(t *testing.T, dir string) []string {
			_ = os.Remove(filepath.Join(dir, FileName(rs[0])))
			_ = os.Remove(filepath.Join(dir, FileName(rs[1])))
			return []string{dir}
		}, AuditOptions{BaseGeneration: 3}, func(t *testing.T, rep *Report) {
			if len(rep.Chain.Notes) != 1 || !strings.Contains(rep.Chain.Notes[0], "link to generation 2 is not checked") {
				t.Errorf("notes %q", rep.Chain.Notes)
			}
		}},
		{"one receipt from the middle", func(t *testing.T, dir string) []string {
			return []string{filepath.Join(dir, FileName(rs[4]))}
		}, AuditOptions{BaseGeneration: 5}, nil},
		{"release matches the newest", func(t *testing.T, dir string) []string { return []string{dir} },
			AuditOptions{Release: func() (ReleaseDigests, error) {
				d := rs[5].Deployment
				return ReleaseDigests{Version: d.Version, LockDigest: d.LockDigest, InventoryDigest: d.InventoryDigest}, nil
			}},
			func(t *testing.T, rep *Report) {
				if rep.Release == nil || rep.Release.Generation != 6 {
					t.Errorf("release %+v", rep.Release)
				}
			}},
		{"stray files", func(t *testing.T, dir string) []string {
			_ = os.WriteFile(filepath.Join(dir, ".ql3-receipt-123.tmp"), []byte("{"), 0o600)
			_ = os.WriteFile(filepath.Join(dir, "README"), []byte("x"), 0o600)
			_ = os.Mkdir(filepath.Join(dir, "old.receipt.json"), 0o755)
			return []string{dir}
		}, AuditOptions{}, func(t *testing.T, rep *Report) {
			if len(rep.StrayFiles) != 1 || !strings.HasSuffix(rep.StrayFiles[0], ".ql3-receipt-123.tmp") {
				t.Errorf("stray %q", rep.StrayFiles)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeChain(t, dir, rs)
			rep := mustAudit(t, tt.setup(t, dir), tt.opts)
			if !rep.OK() {
				t.Fatalf("audit failed:\n%s", failures(rep))
			}
			if tt.check != nil {
				tt.check(t, rep)
			}
		})
	}
}

func TestAuditInputErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		name  string
		paths []string
		opts  AuditOptions
		class fail.Class
	}{
		{"no paths", nil, AuditOptions{}, fail.Invalid},
		{"missing path", []string{filepath.Join(dir, "nope")}, AuditOptions{}, fail.Invalid},
		{"empty directory", []string{dir}, AuditOptions{}, fail.Invalid},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Audit(tt.paths, tt.opts); !fail.Is(err, tt.class) {
				t.Fatalf("got %v, want class %v", err, tt.class)
			}
		})
	}
	writeChain(t, dir, chain(t, 1, 1))
	boom := fail.Errorf(fail.Invalid, "lock drift")
	if _, err := Audit([]string{dir}, AuditOptions{Release: func() (ReleaseDigests, error) { return ReleaseDigests{}, boom }}); !errors.Is(err, boom) {
		t.Fatalf("release error: %v", err)
	}
}

// TestAuditEveryMutatedFile: a sample of single-byte changes to one file of
// a signed chain; every one must fail the audit.
func TestAuditEveryMutatedFile(t *testing.T) {
	rs := chain(t, 3, 3)
	dir := t.TempDir()
	writeChain(t, dir, rs)
	signAll(t, dir, rs, testKey(1))
	target := filepath.Join(dir, FileName(rs[1]))
	orig := mustRead(t, target)
	sigPath := target + ".sig"
	origSig := mustRead(t, sigPath)
	rng := rand.New(rand.NewPCG(3, 4))
	for range 150 {
		path, data := target, orig
		if rng.IntN(4) == 0 {
			path, data = sigPath, origSig
		}
		i := rng.IntN(len(data))
		for _, m := range mutations(data, i) {
			if err := os.WriteFile(path, m, 0o644); err != nil {
				t.Fatal(err)
			}
			rep := mustAudit(t, []string{dir}, AuditOptions{TrustedKeys: trusted(1)})
			if rep.OK() {
				t.Fatalf("%s byte %d changed to %q: audit passed", filepath.Base(path), i, m[i])
			}
		}
		_ = os.WriteFile(path, data, 0o644)
	}
	if rep := mustAudit(t, []string{dir}, AuditOptions{TrustedKeys: trusted(1)}); !rep.OK() {
		t.Fatalf("restored chain fails:\n%s", failures(rep))
	}
}

func trusted(seeds ...byte) TrustedKeys {
	keys := TrustedKeys{}
	for _, s := range seeds {
		pub := testKey(s).Public().(ed25519PublicKey)
		id, _ := KeyID(pub)
		keys[id] = pub
	}
	return keys
}

func signAll(t *testing.T, dir string, rs []*Receipt, k []byte) {
	t.Helper()
	for _, r := range rs {
		if err := os.WriteFile(filepath.Join(dir, FileName(r)+".sig"), mustSign(t, r, k), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func release(lock, inv string) func() (ReleaseDigests, error) {
	return func() (ReleaseDigests, error) { return ReleaseDigests{LockDigest: lock, InventoryDigest: inv}, nil }
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustCanonical(t *testing.T, v any) []byte {
	t.Helper()
	b, err := canonicalJSON(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func flipB64(c byte) string {
	if c == 'A' {
		return "B"
	}
	return "A"
}

// TestSignatureLabels pins docs/receipts.md §5.4: the signature column of
// a receipt with no .sig is "none" with or without trusted keys; with
// trusted keys that row fails (a signature is required), without them it
// passes.
func TestSignatureLabels(t *testing.T) {
	rs := chain(t, 2, 4)
	dir := t.TempDir()
	writeChain(t, dir, rs)
	for _, tt := range []struct {
		opts AuditOptions
		want string
	}{{AuditOptions{}, VerdictOK}, {AuditOptions{TrustedKeys: trusted(1)}, VerdictFail}} {
		rep := mustAudit(t, []string{dir}, tt.opts)
		for _, row := range rep.Receipts {
			if row.Signature != SignatureNone || row.Verdict != tt.want {
				t.Errorf("%d trusted keys: %s: signature %q, verdict %q; want none, %s", len(tt.opts.TrustedKeys), row.File, row.Signature, row.Verdict, tt.want)
			}
		}
	}
}
