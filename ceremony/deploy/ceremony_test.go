package deploy_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/testcluster"
	"github.com/qinglong/kubectl-ql3/receipts"
)

// deploy runs preflight then apply and returns the result.
func deployRelease(t *testing.T, o deploy.Options, dir, kind string, exp deploy.ExpectedHead) *deploy.ApplyResult {
	t.Helper()
	pf := preflight(t, o, dir, kind, exp)
	res, err := deploy.RunApply(context.Background(), o, deploy.ApplyRequest{Preflight: pf.Record})
	if err != nil {
		t.Fatalf("apply %s %s: %v", kind, dir, err)
	}
	return res
}

func preflight(t *testing.T, o deploy.Options, dir, kind string, exp deploy.ExpectedHead) *deploy.PreflightResult {
	t.Helper()
	out := filepath.Join(t.TempDir(), "preflight.json")
	pf, err := deploy.RunPreflight(context.Background(), o, deploy.PreflightRequest{Dir: dir, Transition: kind, Expected: exp, Out: out})
	if err != nil {
		t.Fatalf("preflight %s %s: %v", kind, dir, err)
	}
	return pf
}

// install -> upgrade -> upgrade -> rollback, each leaving the exact Head the
// contract describes, and receipts that audit as one chain.
func TestInstallUpgradeRollback(t *testing.T) {
	ns := targetNamespace(t)
	v300 := release(t, "v3.0.0", ns, "")
	v310 := release(t, "v3.1.0", ns, "")
	v311 := release(t, "v3.1.0", ns, "3.1.1")
	rdir := t.TempDir()
	o := options(t, cluster(t, userConfig(t, "alice", "system:masters")), rdir)

	r1 := deployRelease(t, o, v300, deploy.TransitionInstall, deploy.ExpectedHead{})
	h1 := headOf(t, ns)
	if r1.Outcome != "committed" || h1.Generation != 1 || h1.Phase != deploy.PhaseCommitted || h1.Current.Version != "3.0.0" ||
		h1.Previous != nil || h1.PreviousReceiptDigest != "" || h1.Transition.Kind != "install" || h1.Target.Namespace != ns {
		t.Fatalf("after install: result %+v head %+v", r1, h1)
	}
	if got := h1.Expected().String(); got != r1.ExpectedHead {
		t.Fatalf("apply printed expected head %s, the Head says %s", r1.ExpectedHead, got)
	}

	deployRelease(t, o, v310, deploy.TransitionUpgrade, h1.Expected())
	h2 := headOf(t, ns)
	if h2.Generation != 2 || h2.Current.Version != "3.1.0" || h2.Previous == nil || *h2.Previous != h1.Current.Deployment {
		t.Fatalf("after upgrade: %+v", h2)
	}
	rc1 := readReceipt(t, r1.Receipt)
	if h2.PreviousReceiptDigest != rc1.SelfDigest {
		t.Fatalf("head 2 previousReceiptDigest %s, receipt 1 digest %s", h2.PreviousReceiptDigest, rc1.SelfDigest)
	}
	if len(h2.Current.Inventory) <= len(h1.Current.Inventory) {
		t.Fatalf("v3.1.0 should add objects: %d -> %d", len(h1.Current.Inventory), len(h2.Current.Inventory))
	}

	deployRelease(t, o, v311, deploy.TransitionUpgrade, h2.Expected())
	h3 := headOf(t, ns)
	if h3.Generation != 3 || h3.Current.Version != "3.1.1" || h3.Current.InventoryDigest != h2.Current.InventoryDigest {
		t.Fatalf("after second upgrade: %+v", h3)
	}

	// Roll back to exactly the previous deployment, 3.1.0, from its release directory.
	r4 := deployRelease(t, o, v310, deploy.TransitionRollback, h3.Expected())
	h4 := headOf(t, ns)
	if h4.Generation != 4 || h4.Transition.Kind != "rollback" || h4.Current.Deployment != h2.Current.Deployment || *h4.Previous != h3.Current.Deployment {
		t.Fatalf("after rollback: %+v", h4)
	}
	rep, err := receipts.Audit([]string{rdir}, receipts.AuditOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || len(rep.Receipts) != 4 {
		t.Fatalf("audit of %s: %+v", rdir, rep)
	}
	if r4.ReceiptState != "written" {
		t.Fatalf("rollback receipt state %q", r4.ReceiptState)
	}
}

// The rules refuse, before any write, every transition the Head does not allow.
func TestPreflightRefusals(t *testing.T) {
	ns := targetNamespace(t)
	v300 := release(t, "v3.0.0", ns, "")
	v310 := release(t, "v3.1.0", ns, "")
	drop := release(t, "v3.1.0-drop", ns, "3.1.0")
	older := release(t, "v3.1.0", ns, "2.9.0")
	o := options(t, cluster(t, userConfig(t, "bob", "system:masters")), t.TempDir())
	deployRelease(t, o, v300, deploy.TransitionInstall, deploy.ExpectedHead{})
	h1 := headOf(t, ns)

	stale := h1.Expected()
	stale.StateDigest = "sha256:" + strings.Repeat("0", 64)
	tests := []struct {
		name  string
		dir   string
		kind  string
		exp   deploy.ExpectedHead
		class fail.Class
		msg   string
	}{
		{"install onto a Head", v310, "install", h1.Expected(), fail.Invalid, "already has deployment 3.0.0"},
		{"stale expected head", v310, "upgrade", stale, fail.Conflict, "moved since the preflight"},
		{"expects absent", v310, "upgrade", deploy.ExpectedHead{}, fail.Conflict, "moved since the preflight"},
		{"non-increasing version", older, "upgrade", h1.Expected(), fail.Invalid, "not greater than the deployed 3.0.0"},
		{"same version", v300, "upgrade", h1.Expected(), fail.Invalid, "not greater"},
		{"omits a live object", drop, "upgrade", h1.Expected(), fail.Invalid, "omits 1 live object"},
		{"rollback without previous", v300, "rollback", h1.Expected(), fail.Invalid, "no previous deployment"},
	}
	before := headOf(t, ns)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := deploy.RunPreflight(context.Background(), o, deploy.PreflightRequest{
				Dir: tt.dir, Transition: tt.kind, Expected: tt.exp, Out: filepath.Join(t.TempDir(), "pf.json"),
			})
			if err == nil || fail.ClassOf(err) != tt.class || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("err = %v (class %v), want class %v containing %q", err, fail.ClassOf(err), tt.class, tt.msg)
			}
		})
	}
	if after := headOf(t, ns); after.SelfDigest != before.SelfDigest {
		t.Fatal("a refused preflight changed the Head")
	}
	// Rollback to something that is not exactly the previous deployment.
	deployRelease(t, o, v310, deploy.TransitionUpgrade, h1.Expected())
	h2 := headOf(t, ns)
	_, err := deploy.RunPreflight(context.Background(), o, deploy.PreflightRequest{
		Dir: v310, Transition: "rollback", Expected: h2.Expected(), Out: filepath.Join(t.TempDir(), "pf.json"),
	})
	if !fail.Is(err, fail.Invalid) || !strings.Contains(err.Error(), "not the exact previous deployment") {
		t.Fatalf("rollback to the current release: %v", err)
	}
	_, err = deploy.RunPreflight(context.Background(), o, deploy.PreflightRequest{
		Dir: v300, Transition: "rollback", Expected: h2.Expected(), Out: filepath.Join(t.TempDir(), "pf.json"),
	})
	if !fail.Is(err, fail.Invalid) || !strings.Contains(err.Error(), "inventories differ") {
		t.Fatalf("rollback across an inventory change: %v", err)
	}
}

// A preflight that went stale (the Head moved after it was written) is
// refused at apply before any workload mutation; so is an upgrade that
// omits a live object, when the Head changed under its preflight.
func TestStalePreflightRefusedBeforeWorkloadWrites(t *testing.T) {
	ns := targetNamespace(t)
	v300 := release(t, "v3.0.0", ns, "")
	v310 := release(t, "v3.1.0", ns, "")
	v311 := release(t, "v3.1.0", ns, "3.1.1")
	winner := options(t, cluster(t, userConfig(t, "winner", "system:masters")), t.TempDir())
	deployRelease(t, winner, v300, deploy.TransitionInstall, deploy.ExpectedHead{})
	h1 := headOf(t, ns)

	loserCfg := userConfig(t, "loser-"+ns, "system:masters")
	loser := options(t, cluster(t, loserCfg), t.TempDir())
	pf := preflight(t, loser, v311, deploy.TransitionUpgrade, h1.Expected())
	deployRelease(t, winner, v310, deploy.TransitionUpgrade, h1.Expected())

	_, err := deploy.RunApply(context.Background(), loser, deploy.ApplyRequest{Preflight: pf.Record})
	if !fail.Is(err, fail.Conflict) || !strings.Contains(err.Error(), "moved since the preflight") {
		t.Fatalf("stale apply: %v", err)
	}
	assertNoWrites(t, "loser-"+ns, "")
}

// assertNoWrites checks the API server's own audit log: user made no
// write (dry-runs aside) other than to the resources allowed.
func assertNoWrites(t *testing.T, user string, allowResource string) {
	t.Helper()
	writes, err := cp.Writes(func(e testcluster.AuditEvent) bool {
		return e.User.Username == user && e.ObjectRef.Resource != allowResource
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(writes) > 0 {
		t.Fatalf("%s wrote %d object(s), first: %s %s/%s/%s", user, len(writes), writes[0].Verb, writes[0].ObjectRef.Resource, writes[0].ObjectRef.Namespace, writes[0].ObjectRef.Name)
	}
}

func readReceipt(t *testing.T, path string) *receipts.Receipt {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r, err := receipts.Parse(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return r
}
