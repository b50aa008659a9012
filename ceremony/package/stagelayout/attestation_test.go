package stagelayout_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qinglong/kubectl-ql3/ceremony/package/stagelayout"
	"github.com/qinglong/kubectl-ql3/ceremony/package/stagelayout/stagelayouttest"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/intoto"
	"github.com/qinglong/kubectl-ql3/internal/testkit"
)

// A stage attested with the stage key verifies, its envelope is the one
// intoto writes (predicate the statement blob, subjects the manifest, lock,
// bundle and evidence blobs), and cosign verifies it with the stage's
// public key against the bundle, lock and manifest blob files: accepted,
// and refused for another key or a changed bundle.
func TestStageAttestation(t *testing.T) {
	s, err := stagelayouttest.Write(t.TempDir(), stagelayouttest.Spec{Attester: stagelayouttest.Key(1)})
	if err != nil {
		t.Fatal(err)
	}
	if ev, err := verifier(s.Dir).Verify(s.Intent()); err != nil || ev != s.Evidence {
		t.Fatalf("Verify: %+v %v", ev, err)
	}
	p, err := intoto.Parse(read(t, s.Blobs["attestation"]))
	if err != nil {
		t.Fatal(err)
	}
	st := &p.Statement
	if st.PredicateType != stagelayout.PredicateType || string(st.Predicate) != string(read(t, s.Blobs["statement"])) || len(st.Subjects) != 4 {
		t.Fatalf("statement %+v", st)
	}
	pub := testkit.WriteFile(t, filepath.Join(t.TempDir(), "stage.pub"), stagelayouttest.PublicKeyPEM(stagelayouttest.Key(1)), 0o644)
	for _, part := range []string{"bundle", "lock", "manifest", "config"} {
		if out, code := testkit.CosignVerifyAttestation(t, pub, stagelayout.PredicateType, s.Blobs["attestation"], s.Blobs[part]); code != 0 || !strings.Contains(out, "Verified OK") {
			t.Fatalf("cosign refused the stage attestation for the %s blob: exit %d\n%s", part, code, out)
		}
	}
	other := testkit.WriteFile(t, filepath.Join(t.TempDir(), "other.pub"), stagelayouttest.PublicKeyPEM(stagelayouttest.Key(2)), 0o644)
	if out, code := testkit.CosignVerifyAttestation(t, other, stagelayout.PredicateType, s.Blobs["attestation"], s.Blobs["bundle"]); code == 0 || !strings.Contains(out, "accepted signatures do not match threshold") {
		t.Fatalf("cosign under another key: exit %d\n%s", code, out)
	}
	changed := read(t, s.Blobs["bundle"])
	changed[0] ^= 1
	if out, code := testkit.CosignVerifyAttestation(t, pub, stagelayout.PredicateType, s.Blobs["attestation"], testkit.WriteFile(t, filepath.Join(t.TempDir(), "bundle"), changed, 0o644)); code == 0 || !strings.Contains(out, "no matching subject digest found") {
		t.Fatalf("cosign for a changed bundle: exit %d\n%s", code, out)
	}
}

// A stage attestation that does not hold is a conflict where the stage
// receipt is verified: one by a key the verifier does not trust, and one
// whose predicate, signed by the trusted key, describes another bundle.
func TestStageAttestationRefused(t *testing.T) {
	for _, c := range []struct {
		name string
		spec stagelayouttest.Spec
		want string
	}{
		{"untrusted key", stagelayouttest.Spec{Attester: stagelayouttest.Key(2)}, "is not a trusted key"},
		{"another bundle", stagelayouttest.Spec{Attester: stagelayouttest.Key(1), AttestStatement: func(st *stagelayout.Statement) {
			st.ContentDigest = st.LockDigest
		}}, "its predicate does not describe manifest"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := stagelayouttest.Write(t.TempDir(), c.spec)
			if err != nil {
				t.Fatal(err)
			}
			_, err = verifier(s.Dir).Verify(s.Intent())
			if !fail.Is(err, fail.Conflict) || !strings.Contains(err.Error(), "stage attestation") || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Verify: %v (class %v), want conflict saying %q", err, fail.ClassOf(err), c.want)
			}
		})
	}
}

func read(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
