package plugin_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qinglong/kubectl-ql3/ceremony/keyset"
	"github.com/qinglong/kubectl-ql3/ceremony/keyset/jwkset"
)

// keyset publish through the built binary: a rotation, the revocation
// gate, a rollback refused with exit 3, and the JSON report.
func TestKeysetPublishCLI(t *testing.T) {
	ns := cp.Namespace(t)
	dir := t.TempDir()
	a, b := ksJWK("a", 2), ksJWK("b", 4)
	g1 := ksWrite(t, dir, "keyset-1.json", &jwkset.Keyset{Generation: 1, Keys: []jwkset.JWK{a}, RevokedKids: []string{}})
	g2 := ksWrite(t, dir, "keyset-2.json", &jwkset.Keyset{Generation: 2, Keys: []jwkset.JWK{a, b}, RevokedKids: []string{}})
	g3k := &jwkset.Keyset{Generation: 3, Keys: []jwkset.JWK{b}, RevokedKids: []string{"a"}}
	g3 := ksWrite(t, dir, "keyset-3.json", g3k)

	out := mustRun(t, nil, "keyset", "publish", g1, "-n", ns)
	if !strings.Contains(out, "secret/"+keyset.LedgerSecret+": created") || !strings.Contains(out, "secret/"+keyset.KeysetSecret+": created") {
		t.Fatalf("first publish printed:\n%s", out)
	}
	mustRun(t, nil, "keyset", "publish", g2, "-n", ns, "--previous", g1)

	stdout, stderr, code := run(t, nil, "keyset", "publish", g3, "-n", ns, "--previous", g2)
	if code != 2 || stdout != "" || !strings.Contains(stderr, "--confirm-overlap-observed") {
		t.Fatalf("revoking without confirmation: exit %d, stdout %q, stderr %q; want exit 2 naming the flag", code, stdout, stderr)
	}
	out = mustRun(t, nil, "keyset", "publish", g3, "-n", ns, "--previous", g2, "--confirm-overlap-observed", "-o", "json")
	var rep struct {
		Generation   int64    `json:"generation"`
		Digest       string   `json:"digest"`
		NewlyRevoked []string `json:"newlyRevoked"`
		Note         string   `json:"note"`
		Ledger       struct {
			Action string `json:"action"`
		} `json:"ledger"`
		LedgerGenerations int `json:"ledgerGenerations"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	if rep.Generation != 3 || rep.Digest != ksDigest(t, g3k) || !slices.Equal(rep.NewlyRevoked, []string{"a"}) ||
		rep.Ledger.Action != "updated" || rep.LedgerGenerations != 3 || !strings.Contains(rep.Note, "not known to be in effect cluster-wide") {
		t.Fatalf("report: %+v", rep)
	}
	stdout, stderr, code = run(t, nil, "keyset", "publish", g2, "-n", ns)
	if code != 3 || stdout != "" || !strings.Contains(stderr, "below the ledger's highest generation 3") {
		t.Fatalf("rollback: exit %d, stderr %q; want exit 3", code, stderr)
	}
}

// The Role keyset rbac prints, bound to a user with no other rights, is
// enough for that user's publish through the binary.
func TestKeysetRBACCLI(t *testing.T) {
	ns := cp.Namespace(t)
	out := mustRun(t, nil, "keyset", "rbac", "-n", ns)
	for _, want := range []string{"kind: Role", keyset.LedgerSecret, keyset.KeysetSecret, "cannot be limited by name"} {
		if !strings.Contains(out, want) {
			t.Fatalf("rbac yaml lacks %q:\n%s", want, out)
		}
	}
	out = mustRun(t, nil, "keyset", "rbac", "-n", ns, "--bind-user", "kpub", "-o", "json")
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list.Items) != 2 {
		t.Fatalf("rbac -o json: %v, %d items\n%s", err, len(list.Items), out)
	}
	cp.KubectlApply(t, out)
	kc, err := cp.Kubeconfig("kpub")
	if err != nil {
		t.Fatal(err)
	}
	g1 := ksWrite(t, t.TempDir(), "keyset-1.json", &jwkset.Keyset{Generation: 1, Keys: []jwkset.JWK{ksJWK("a", 2)}, RevokedKids: []string{}})
	mustRun(t, []string{"KUBECONFIG=" + kc}, "keyset", "publish", g1, "-n", ns)
	stdout, stderr, code := run(t, []string{"KUBECONFIG=" + kc}, "keyset", "publish", g1, "-n", "default")
	if code != 2 || stdout != "" || !strings.Contains(stderr, "lacks") {
		t.Fatalf("publish outside the granted namespace: exit %d, stderr %q; want exit 2 listing what is missing", code, stderr)
	}
}

// A key revoked as "a" and published again as "a2" is refused through the
// binary with exit 3, naming both key IDs, the thumbprint and the
// generation that revoked it, whatever --confirm-overlap-observed says and
// with the keyset Secret deleted; the refused publishes write nothing.
func TestKeysetPublishRevokedKeyUnderNewKidCLI(t *testing.T) {
	ns := cp.Namespace(t)
	dir := t.TempDir()
	a, b := ksJWK("a", 2), ksJWK("b", 4)
	g1 := ksWrite(t, dir, "keyset-1.json", &jwkset.Keyset{Generation: 1, Keys: []jwkset.JWK{a}, RevokedKids: []string{}})
	g2 := ksWrite(t, dir, "keyset-2.json", &jwkset.Keyset{Generation: 2, Keys: []jwkset.JWK{a, b}, RevokedKids: []string{}})
	g3 := ksWrite(t, dir, "keyset-3.json", &jwkset.Keyset{Generation: 3, Keys: []jwkset.JWK{b}, RevokedKids: []string{"a"}})
	g4 := ksWrite(t, dir, "keyset-4.json", &jwkset.Keyset{Generation: 4, Keys: []jwkset.JWK{b, ksJWK("a2", 2)}, RevokedKids: []string{"a"}})
	mustRun(t, nil, "keyset", "publish", g1, "-n", ns)
	mustRun(t, nil, "keyset", "publish", g2, "-n", ns, "--previous", g1)
	out := mustRun(t, nil, "keyset", "publish", g3, "-n", ns, "--previous", g2, "--confirm-overlap-observed", "-o", "json")
	var rep struct {
		RevokedWithoutThumbprint []string `json:"revokedWithoutThumbprint"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.RevokedWithoutThumbprint == nil || len(rep.RevokedWithoutThumbprint) != 0 {
		t.Fatalf("revoking a: %v, revokedWithoutThumbprint %q; want [] (the ledger saw a's key)\n%s", err, rep.RevokedWithoutThumbprint, out)
	}

	kc, err := cp.Kubeconfig("ks-revived", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	want := `key "a2" of generation 4 is the key revoked as "a" in generation 3 (RFC 7638 thumbprint ` + a.Thumbprint() + ")"
	refused := func(what string, args ...string) {
		t.Helper()
		stdout, stderr, code := run(t, []string{"KUBECONFIG=" + kc}, append([]string{"keyset", "publish", g4, "-n", ns, "--confirm-overlap-observed"}, args...)...)
		if code != 3 || stdout != "" || !strings.Contains(stderr, want) {
			t.Fatalf("%s: exit %d, stdout %q, stderr %q; want exit 3 containing %q", what, code, stdout, stderr, want)
		}
		cp.NoWrites(t, "ks-revived", ns, "secrets")
	}
	refused("a's key as a2", "--previous", g3)
	if err := cp.Clientset().CoreV1().Secrets(ns).Delete(context.Background(), keyset.KeysetSecret, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	refused("a's key as a2 with the keyset Secret deleted")
}
