package views

import (
	"bytes"
	"strings"
	"testing"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/receipts"
)

// The preflight record's diffDigest (docs/head.md §4.1) is optional: a
// record without --diff has no such member at all, one with it parses,
// and the member is covered by the preflight digest.
func TestPreflightRecordDiffDigest(t *testing.T) {
	d := func(c string) string { return "sha256:" + strings.Repeat(c, 64) }
	base := func() *deploy.PreflightRecord {
		return &deploy.PreflightRecord{
			Schema: deploy.PreflightSchema,
			Command: deploy.Command{Transition: deploy.TransitionInstall, Version: "3.1.0", LockDigest: d("1"), InventoryDigest: d("2"),
				ClusterIdentity: d("3"), Namespace: "ns", FieldManager: "kubectl-ql3"},
			Release: deploy.PreflightRelease{Dir: "/r", Version: "3.1.0", LockDigest: d("1"), SourceDigest: d("4"), RenderDigest: d("5"), InventoryDigest: d("2"), InventoryCount: 1},
			Target:  receipts.Target{ClusterIdentity: d("3"), Namespace: "ns"},
			Tool:    receipts.Tool{Name: "kubectl-ql3", Version: "v0.1.0", FieldManager: "kubectl-ql3"},
			Steps:   deploy.PreflightSteps{Identity: d("6"), DryRun: d("7")},
		}
	}
	seal := func(p *deploy.PreflightRecord) []byte {
		t.Helper()
		if err := p.Seal(); err != nil {
			t.Fatal(err)
		}
		b, err := p.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	plain := base()
	without := seal(plain)
	if bytes.Contains(without, []byte("diffDigest")) {
		t.Fatalf("a record without --diff names diffDigest: %s", without)
	}
	if _, err := deploy.ParsePreflight("p", without); err != nil {
		t.Fatal(err)
	}
	withRec := base()
	withRec.DiffDigest = d("8")
	with := seal(withRec)
	got, err := deploy.ParsePreflight("p", with)
	if err != nil || got.DiffDigest != d("8") {
		t.Fatalf("record with diffDigest: %v %+v", err, got)
	}
	if withRec.SelfDigest == plain.SelfDigest || bytes.Equal(with, without) {
		t.Fatal("diffDigest is not covered by the record")
	}
	edited := bytes.Replace(with, []byte(d("8")), []byte(d("9")), 1)
	if _, err := deploy.ParsePreflight("p", edited); fail.ClassOf(err) != fail.Invalid || !strings.Contains(err.Error(), "edited") {
		t.Fatalf("edited diffDigest: %v", err)
	}
	bad := base()
	bad.DiffDigest = "nope"
	if _, err := deploy.ParsePreflight("p", seal(bad)); err == nil || !strings.Contains(err.Error(), "diffDigest") {
		t.Fatalf("malformed diffDigest: %v", err)
	}
}
