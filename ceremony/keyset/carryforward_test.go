package keyset

import (
	"context"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qinglong/kubectl-ql3/ceremony/keyset/jwkset"
	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// setV1Ledger rewrites the ledger Secret to the v1 form of what it holds,
// as a publisher from before thumbprints wrote it.
func setV1Ledger(t *testing.T, ns string) {
	t.Helper()
	c := cp.Clientset().CoreV1().Secrets(ns)
	s, err := c.Get(context.Background(), LedgerSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := ParseLedgerSecret(s)
	if err != nil {
		t.Fatal(err)
	}
	if s.Data[LedgerKey], err = v1Of(l).Bytes(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func ledgerOnCluster(t *testing.T, ns string) *jwkset.Ledger {
	t.Helper()
	s, err := cp.Clientset().CoreV1().Secrets(ns).Get(context.Background(), LedgerSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := ParseLedgerSecret(s)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// A ledger written before thumbprints (v1) is carried forward by the first
// publish: a revoked key the keyset Secret still shows gets its thumbprint
// (so it is refused under a new kid, before any write, now and after the
// keyset Secret moves on); one nothing shows is reported as unknown.
func TestPublishCarriesV1LedgerForward(t *testing.T) {
	g1, g2, g3 := gen(t, 1, []string{"a"}), gen(t, 2, []string{"a", "b"}), gen(t, 3, []string{"b"}, "a")
	revived := gen(t, 4, []string{"b", "a2"}, "a") // "a2" holds a's key
	setup := func(t *testing.T, keysetAt *jwkset.Keyset) string {
		ns := cp.Namespace(t)
		admin := publisher(t, cp.RESTConfig(), ns)
		mustPublish(t, admin, g1)
		mustPublish(t, admin, g2)
		mustPublish(t, admin, g3, confirmed)
		setV1Ledger(t, ns)
		setKeyset(t, ns, keysetAt)
		return ns
	}
	refusedBy := func(t *testing.T, ns, user, wantErr string) {
		t.Helper()
		_, err := publish(t, publisher(t, cp.User(t, user, "system:masters"), ns), revived, confirmed)
		if !fail.Is(err, fail.Conflict) || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("publish of a's key as a2: %v, want conflict containing %q", err, wantErr)
		}
		cp.NoWrites(t, user, ns, "secrets")
	}

	t.Run("keyset Secret behind shows the revoked key", func(t *testing.T) {
		ns := setup(t, g2)
		refusedBy(t, ns, "legacy-refused", `key "a2" of generation 4 is the key revoked as "a" before the ledger recorded when (RFC 7638 thumbprint `+key("a", 'a').Thumbprint())
		res := mustPublish(t, publisher(t, cp.RESTConfig(), ns), g3, confirmed)
		if res.Ledger.Action != Updated || !res.LedgerCarriedForward || !res.Converged || len(res.RevokedWithoutThumbprint) != 0 {
			t.Fatalf("rerun on the v1 ledger: %+v; want the ledger carried forward, the keyset converged, nothing unknown", res)
		}
		if l := ledgerOnCluster(t, ns); l.Schema != jwkset.LedgerSchema || len(l.UnknownRevoked()) != 0 {
			t.Fatalf("ledger on the cluster: schema %s, unknown %q", l.Schema, l.UnknownRevoked())
		}
		// The keyset Secret no longer shows a's key; the ledger remembers it.
		refusedBy(t, ns, "upgraded-refused", `key "a2" of generation 4 is the key revoked as "a"`)
	})

	t.Run("nothing shows the revoked key", func(t *testing.T) {
		ns := setup(t, g3)
		res := mustPublish(t, publisher(t, cp.RESTConfig(), ns), gen(t, 4, []string{"b", "c"}, "a"))
		if !res.LedgerCarriedForward || !slices.Equal(res.RevokedWithoutThumbprint, []string{"a"}) {
			t.Fatalf("publish on the v1 ledger: %+v; want carried forward, a reported without thumbprint", res)
		}
	})
}
