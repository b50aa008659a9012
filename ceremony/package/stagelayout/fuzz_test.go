package stagelayout_test

import (
	"crypto/ed25519"
	"testing"

	"github.com/qinglong/kubectl-ql3/ceremony/package/stagelayout"
	"github.com/qinglong/kubectl-ql3/ceremony/package/stagelayout/stagelayouttest"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

// FuzzParseStatement: a statement ParseStatement accepts re-encodes to
// bytes it accepts again, with the same signing input; its errors are
// conflicts (the blob was intact, its content wrong); and only a signature
// by the trusted key verifies.
func FuzzParseStatement(f *testing.F) {
	st := stagelayout.Statement{
		Schema:                stagelayout.StatementSchema,
		StageReference:        "registry.example.com/p@" + canon.DigestBytes("test", []byte("m")),
		LockDigest:            canon.DigestBytes("test", []byte("l")),
		ContentDigest:         canon.DigestBytes("test", []byte("c")),
		AdapterEvidenceDigest: canon.DigestBytes("test", []byte("a")),
	}
	blob, err := st.Sign(stagelayouttest.Key(1))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(blob)
	f.Add([]byte(`{"schema":"qinglong/plugin-package-stage-receipt@v1"}`))
	f.Add([]byte(`[]`))
	trusted := []ed25519.PublicKey{stagelayouttest.Key(1).Public().(ed25519.PublicKey)}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := stagelayout.ParseStatement(data)
		if err != nil {
			if !fail.Is(err, fail.Conflict) {
				t.Fatalf("class %v: %v", fail.ClassOf(err), err)
			}
			return
		}
		again, err := canon.Canonical(s)
		if err != nil {
			t.Fatal(err)
		}
		s2, err := stagelayout.ParseStatement(again)
		if err != nil {
			t.Fatalf("canonical form refused: %v", err)
		}
		m1, _ := s.SigningInput()
		m2, _ := s2.SigningInput()
		if string(m1) != string(m2) {
			t.Fatal("signing input changed on re-encoding")
		}
		if _, err := s.VerifySignature(trusted); err == nil && s != mustParse(t, blob) {
			t.Fatalf("a statement other than the seed verifies under the seed key: %+v", s)
		}
	})
}

func mustParse(t *testing.T, blob []byte) stagelayout.Statement {
	s, err := stagelayout.ParseStatement(blob)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// FuzzParsePublicKey: an accepted key file is exactly one Ed25519 key;
// anything else is invalid input.
func FuzzParsePublicKey(f *testing.F) {
	f.Add(stagelayouttest.PublicKeyPEM(stagelayouttest.Key(1)))
	f.Add([]byte("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		k, err := stagelayout.ParsePublicKey("f", data)
		if err != nil {
			if !fail.Is(err, fail.Invalid) {
				t.Fatalf("class %v: %v", fail.ClassOf(err), err)
			}
			return
		}
		if len(k) != ed25519.PublicKeySize {
			t.Fatalf("accepted a %d-byte key", len(k))
		}
	})
}
