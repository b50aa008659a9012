package receipts

import (
	"strings"
	"testing"
)

// superseding is the receipt of generation g, which superseded the
// applying generations between p and g (none of which has a receipt): an
// upgrade to version v, or (v "") a rollback to p's deployment, the last
// committed one.
func superseding(p *Receipt, g int64, kind, v string) *rb {
	b := following(p, kind, v)
	b.r.Generation = g
	for s := p.Generation + 1; s < g; s++ {
		b.r.Transition.Supersedes = append(b.r.Transition.Supersedes, Superseded{
			Generation: s, Kind: KindUpgrade, Version: "9.0.0", CommandDigest: td("command-%d", s),
			PreflightDigest: td("preflight-%d", s), MutationID: "00112233445566778899aabbccddeeff", At: "2026-12-01T22:00:00Z",
		})
	}
	if kind == KindRollback {
		b.r.Deployment = p.Deployment
	}
	return b
}

func auditDir(t *testing.T, rs ...*Receipt) *Report {
	t.Helper()
	dir := t.TempDir()
	writeChain(t, dir, rs)
	return mustAudit(t, []string{dir}, AuditOptions{})
}

// A generation with no receipt is accepted only when the next receipt
// declares it superseded; the audit says so in its notes.
func TestAuditSupersededChain(t *testing.T) {
	rs := chain(t, 3, 4) // 1 install, 2 and 3 upgrades
	for _, tt := range []struct {
		name  string
		tail  []*Receipt
		notes []string
	}{
		{"rollback supersedes 4", []*Receipt{superseding(rs[2], 5, KindRollback, "").sealed(t)},
			[]string{"generation 4 (upgrade 9.0.0, preflight " + td("preflight-4") + ") has no receipt: it never committed, and generation 5 (rollback 3.2.0) superseded it at 2026-12-01T22:00:00Z (by its applier's clock)"}},
		{"upgrade supersedes 4 and 5", []*Receipt{superseding(rs[2], 6, KindUpgrade, "3.9.0").sealed(t)},
			[]string{"generation 4 (upgrade 9.0.0", "generation 5 (upgrade 9.0.0"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			all := append(append([]*Receipt{}, rs...), tt.tail...)
			all = append(all, following(all[len(all)-1], KindUpgrade, "4.0.0").sealed(t))
			rep := auditDir(t, all...)
			if !rep.OK() {
				t.Fatalf("audit:\n%s", failures(rep))
			}
			notes := strings.Join(rep.Chain.Notes, "\n")
			for _, n := range tt.notes {
				if !strings.Contains(notes, n) {
					t.Errorf("notes %q lack %q", notes, n)
				}
			}
		})
	}
}

// Everything else stays a chain break: a gap no receipt declares, a
// declared generation that has a receipt, a supersedes list that forgets
// a generation, and a superseding rollback that is not the last committed
// deployment.
func TestAuditSupersededBreaks(t *testing.T) {
	rs := chain(t, 3, 4)
	plain := following(rs[2], KindUpgrade, "3.5.0")
	plain.r.Generation = 5
	g4 := following(rs[2], KindUpgrade, "3.4.0").sealed(t)
	forgot := superseding(rs[2], 6, KindUpgrade, "3.9.0").with(func(r *Receipt) {
		r.Transition.Supersedes = r.Transition.Supersedes[1:] // declares 5, not 4
	})
	for _, tt := range []struct {
		name string
		rs   []*Receipt
		want string
	}{
		{"gap without supersedes", append(rs[:3:3], plain.sealed(t)), "generation 4 is missing"},
		{"superseded generation has a receipt", append(rs[:3:3], g4, superseding(rs[2], 5, KindUpgrade, "3.9.0").with(func(r *Receipt) {
			r.PreviousReceiptDigest = g4.SelfDigest
			d := g4.Deployment
			r.PreviousDeployment = &d
		}).sealed(t)), "declares it superseded generation 4, which has a receipt here"},
		{"supersedes forgets a generation", append(rs[:3:3], forgot.sealed(t)), "generation 4 is missing"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rep := auditDir(t, tt.rs...)
			if rep.OK() || !strings.Contains(failures(rep), tt.want) {
				t.Fatalf("want a chain break %q, got OK=%v:\n%s", tt.want, rep.OK(), failures(rep))
			}
		})
	}
}

// What one receipt's supersedes must be, checked by Seal and Parse alike.
func TestSupersedesReceiptRules(t *testing.T) {
	rs := chain(t, 3, 4)
	for _, tt := range []struct {
		name string
		edit func(*Receipt)
		want string
	}{
		{"not the generations just below", func(r *Receipt) { r.Transition.Supersedes[0].Generation = 3 }, "want 4"},
		{"on an install-less reach", func(r *Receipt) {
			r.Transition.Supersedes = append([]Superseded{r.Transition.Supersedes[0]}, r.Transition.Supersedes...)
			r.Transition.Supersedes = append(r.Transition.Supersedes, r.Transition.Supersedes[0], r.Transition.Supersedes[0])
		}, "reaching below generation 2"},
		{"bad mutation id", func(r *Receipt) { r.Transition.Supersedes[0].MutationID = "xyz" }, "32 lowercase hex"},
		{"time not UTC", func(r *Receipt) { r.Transition.Supersedes[0].At = "2026-12-01T23:00:00+01:00" }, "not a UTC time"},
		{"superseded install", func(r *Receipt) { r.Transition.Supersedes[0].Kind = KindInstall }, "only an upgrade or a rollback is superseded"},
		{"rollback elsewhere", func(r *Receipt) {
			r.Transition.Kind = KindRollback
			r.Deployment.LockDigest = td("other")
		}, "returns to the last committed deployment"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := superseding(rs[2], 5, KindUpgrade, "3.9.0").with(tt.edit)
			r := b.r
			if err := derive(&r); err != nil {
				t.Fatal(err)
			}
			err := r.Seal()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("seal: want %q, got %v", tt.want, err)
			}
			if _, err := Parse(forge(t, &r)); err == nil {
				t.Fatal("Parse accepted what Seal refused")
			}
		})
	}
}
