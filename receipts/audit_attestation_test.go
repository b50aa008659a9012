package receipts

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"
)

// signedDir publishes a chain of three receipts signed (with attestations)
// by testKey(1) into a fresh directory.
func signedDir(t *testing.T) (string, []*Receipt) {
	t.Helper()
	dir := t.TempDir()
	rs := chain(t, 3, 3)
	for _, r := range rs {
		if _, err := Publish(dir, r, testKey(1), fakeRendered(r)); err != nil {
			t.Fatal(err)
		}
	}
	return dir, rs
}

// rewrapped is env with its payload replaced by p, the signature kept.
func rewrapped(t *testing.T, env, p []byte) []byte {
	t.Helper()
	var e dsse.Envelope
	if err := json.Unmarshal(env, &e); err != nil {
		t.Fatal(err)
	}
	e.Payload = base64.StdEncoding.EncodeToString(p)
	return mustCanonical(t, e)
}

func payloadOf(t *testing.T, env []byte) []byte {
	t.Helper()
	var e dsse.Envelope
	if err := json.Unmarshal(env, &e); err != nil {
		t.Fatal(err)
	}
	p, err := base64.StdEncoding.DecodeString(e.Payload)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The audit checks the attestation beside each receipt: verified with the
// trusted key, unverified (content still checked) without one.
func TestAuditAttestationAccepted(t *testing.T) {
	dir, _ := signedDir(t)
	for _, c := range []struct {
		opts AuditOptions
		want string
	}{{AuditOptions{TrustedKeys: trusted(1)}, SignatureVerified}, {AuditOptions{}, SignatureUnverified}} {
		rep := mustAudit(t, []string{dir}, c.opts)
		if !rep.OK() {
			t.Fatalf("signed chain fails:\n%s", failures(rep))
		}
		for _, row := range rep.Receipts {
			if row.Attestation != c.want {
				t.Errorf("%s: attestation %q, want %q", row.File, row.Attestation, c.want)
			}
		}
	}
}

// Each way of changing an attestation fails its receipt's row (the
// command's exit 5), and the receipt's own signature is not what caught it.
func TestAuditAttestationTamper(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(t *testing.T, env []byte, r *Receipt) []byte
		keys   TrustedKeys
		want   string
	}{
		{"a byte of the envelope's signature", func(t *testing.T, env []byte, r *Receipt) []byte {
			i := bytes.Index(env, []byte(`"sig":"`)) + len(`"sig":"`) + 10
			return append(append(bytes.Clone(env[:i]), flipB64(env[i])...), env[i+1:]...)
		}, trusted(1), "does not verify"},
		{"a byte of the payload, re-encoded", func(t *testing.T, env []byte, r *Receipt) []byte {
			return rewrapped(t, env, bytes.Replace(payloadOf(t, env), []byte(`"forceConflicts":false`), []byte(`"forceConflicts":true`), 1))
		}, trusted(1), "does not verify"},
		{"signed by another key", func(t *testing.T, env []byte, r *Receipt) []byte {
			return mustAttest(t, r, testKey(2))
		}, trusted(1), "not a trusted key"},
		{"signed by another key the auditor trusts too", func(t *testing.T, env []byte, r *Receipt) []byte {
			return mustAttest(t, r, testKey(2))
		}, trusted(1, 2), "but the receipt's signature by key"},
		{"signed by another key, without a trusted key", func(t *testing.T, env []byte, r *Receipt) []byte {
			return mustAttest(t, r, testKey(2))
		}, nil, "but the receipt's signature by key"},
		{"a predicate that is another receipt, signed by the trusted key", func(t *testing.T, env []byte, r *Receipt) []byte {
			return mustAttest(t, following(r, KindUpgrade, "9.0.0").sealed(t), testKey(1))
		}, trusted(1), "predicate is not this receipt"},
		{"the same, without a trusted key", func(t *testing.T, env []byte, r *Receipt) []byte {
			return mustAttest(t, following(r, KindUpgrade, "9.0.0").sealed(t), testKey(1))
		}, nil, "predicate is not this receipt"},
		{"a trailing newline", func(t *testing.T, env []byte, r *Receipt) []byte {
			return append(bytes.Clone(env), '\n')
		}, nil, "not canonical"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, rs := signedDir(t)
			r := rs[1]
			path := filepath.Join(dir, AttestationName(r))
			env := mustRead(t, path)
			changed := c.change(t, env, r)
			if bytes.Equal(changed, env) {
				t.Fatal("the change changed nothing")
			}
			if err := os.WriteFile(path, changed, 0o644); err != nil {
				t.Fatal(err)
			}
			rep := mustAudit(t, []string{dir}, AuditOptions{TrustedKeys: c.keys})
			row := rep.Receipts[1]
			if rep.OK() || row.Verdict != VerdictFail || row.Attestation != SignatureInvalid || !strings.Contains(strings.Join(row.Reasons, "; "), c.want) {
				t.Fatalf("row %+v, want FAIL with %q", row, c.want)
			}
			if wantSig := map[bool]string{true: SignatureVerified, false: SignatureUnverified}[c.keys != nil]; row.Signature != wantSig {
				t.Fatalf("signature %q: the receipt's own signature must still hold", row.Signature)
			}
			for _, other := range []ReceiptVerdict{rep.Receipts[0], rep.Receipts[2]} {
				if other.Verdict != VerdictOK {
					t.Fatalf("untouched row fails: %+v", other)
				}
			}
		})
	}
}

// An attestation whose receipt is gone is evidence of a removed receipt,
// as an orphan signature is.
func TestAuditOrphanAttestation(t *testing.T) {
	dir, rs := signedDir(t)
	last := rs[len(rs)-1]
	for _, name := range []string{FileName(last), FileName(last) + SignatureSuffix} {
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	rep := mustAudit(t, []string{dir}, AuditOptions{TrustedKeys: trusted(1)})
	if rep.OK() || !strings.Contains(strings.Join(rep.Chain.Reasons, "; "), "attestation \""+filepath.Join(dir, AttestationName(last))+"\" has no receipt beside it") {
		t.Fatalf("orphan attestation passed: %+v", rep.Chain)
	}
	// Given as a file on its own, too.
	rep = mustAudit(t, []string{filepath.Join(dir, FileName(rs[0])), filepath.Join(dir, AttestationName(last))}, AuditOptions{})
	if rep.OK() {
		t.Fatalf("orphan attestation given by name passed: %+v", rep.Chain)
	}
}
