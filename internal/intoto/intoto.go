// Package intoto is the one writer and verifier of the tool's attestations:
// an in-toto Statement v1 (github.com/in-toto/attestation's go/v1 types) in
// a DSSE envelope (go-securesystemslib's dsse package: its PAE, signer and
// verifier), signed with an Ed25519 key (docs/receipts.md §7). It knows no
// receipt: the caller gives the predicate type, the predicate and the
// subjects, so every kind of evidence is sealed the same way.
//
// The envelope file is the RFC 8785 canonical JSON of the DSSE envelope,
// with exactly one signature and no trailing newline; the payload is the
// canonical JSON of the Statement. Both are checked byte for byte on read.
package intoto

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"

	v1 "github.com/in-toto/attestation/go/v1"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

// PayloadType is the DSSE payload type of an in-toto Statement.
const PayloadType = "application/vnd.in-toto+json"

// StatementType is the Statement's _type: in-toto Statement v1 only.
const StatementType = v1.StatementTypeUri

// MaxEnvelopeBytes bounds an envelope file; larger ones are refused unread.
const MaxEnvelopeBytes = 48 << 20

// Subject is one artifact the Statement is about: a name and the lowercase
// hex SHA-256 of its bytes.
type Subject struct {
	Name   string
	SHA256 string
}

// Statement is what a verified (or parsed) envelope says.
type Statement struct {
	PredicateType string
	// Predicate is the predicate's canonical JSON (RFC 8785).
	Predicate []byte
	Subjects  []Subject
}

// Parsed is an envelope read strictly, its signature not yet verified.
type Parsed struct {
	Statement
	// KeyID is the signature's keyid.
	KeyID string
	env   dsse.Envelope
}

var hex64 = regexp.MustCompile(`^[0-9a-f]{64}$`)

// Seal builds the Statement {_type, subject, predicateType, predicate} from
// its parts and returns the envelope file's bytes, signed over DSSE's PAE
// with key under keyID. predicate must be a JSON object; its canonical
// JSON is what the payload holds.
func Seal(predicateType string, predicate []byte, subjects []Subject, key ed25519.PrivateKey, keyID string) ([]byte, error) {
	if len(key) != ed25519.PrivateKeySize {
		return nil, fail.Errorf(fail.Invalid, "attestation signing key is not an Ed25519 private key")
	}
	if keyID == "" {
		return nil, fail.Errorf(fail.Invalid, "attestation key id is empty")
	}
	payload, err := payloadOf(Statement{PredicateType: predicateType, Predicate: predicate, Subjects: subjects})
	if err != nil {
		return nil, fail.Errorf(fail.Invalid, "attestation: %w", err)
	}
	signer, err := dsse.NewEnvelopeSigner(ed25519SV{pub: key.Public().(ed25519.PublicKey), priv: key, id: keyID})
	if err != nil {
		return nil, err
	}
	env, err := signer.SignPayload(context.Background(), PayloadType, payload)
	if err != nil {
		return nil, fmt.Errorf("attestation: sign: %w", err)
	}
	return canon.Canonical(env)
}

// payloadOf is the Statement's canonical JSON, built with the in-toto
// types and validated by them.
func payloadOf(s Statement) ([]byte, error) {
	if s.PredicateType == "" {
		return nil, errors.New("predicate type is empty")
	}
	if len(s.Subjects) == 0 {
		return nil, errors.New("no subject")
	}
	st := &v1.Statement{Type: StatementType, PredicateType: s.PredicateType, Predicate: &structpb.Struct{}}
	for _, sub := range s.Subjects {
		if sub.Name == "" || !hex64.MatchString(sub.SHA256) {
			return nil, fmt.Errorf("subject %q: a name and 64 lowercase hex digits of SHA-256 are required", sub.Name)
		}
		st.Subject = append(st.Subject, &v1.ResourceDescriptor{Name: sub.Name, Digest: map[string]string{"sha256": sub.SHA256}})
	}
	if err := protojson.Unmarshal(s.Predicate, st.Predicate); err != nil {
		return nil, fmt.Errorf("predicate is not a JSON object: %w", err)
	}
	if err := st.Validate(); err != nil {
		return nil, fmt.Errorf("statement: %w", err)
	}
	raw, err := protojson.Marshal(st)
	if err != nil {
		return nil, err
	}
	payload, err := canon.CanonicalizeJSON(raw)
	if err != nil {
		return nil, err
	}
	// The predicate travels through protobuf's Struct: it must come out as
	// the canonical JSON that went in (a guard; RFC 8785 reads numbers as
	// doubles too).
	want, err := canon.CanonicalizeJSON(s.Predicate)
	if err != nil {
		return nil, fmt.Errorf("predicate: %w", err)
	}
	var back struct {
		Predicate json.RawMessage `json:"predicate"`
	}
	if err := json.Unmarshal(payload, &back); err != nil {
		return nil, err
	}
	if got, err := canon.CanonicalizeJSON(back.Predicate); err != nil || !bytes.Equal(got, want) {
		return nil, errors.New("predicate does not survive the Statement's encoding unchanged")
	}
	return payload, nil
}

// ed25519SV is the dsse Signer and Verifier of one Ed25519 key: the
// library computes the PAE and calls these with it.
type ed25519SV struct {
	pub  ed25519.PublicKey
	priv ed25519.PrivateKey
	id   string
}

func (k ed25519SV) Sign(_ context.Context, data []byte) ([]byte, error) {
	return ed25519.Sign(k.priv, data), nil
}

func (k ed25519SV) Verify(_ context.Context, data, sig []byte) error {
	if !ed25519.Verify(k.pub, data, sig) {
		return errors.New("ed25519 signature does not verify")
	}
	return nil
}

func (k ed25519SV) KeyID() (string, error)   { return k.id, nil }
func (k ed25519SV) Public() crypto.PublicKey { return k.pub }

// Verify parses data strictly (Parse) and verifies its signature over
// DSSE's PAE with the trusted key its keyid names. Every failure is
// fail.Tamper.
func Verify(data []byte, keys map[string]ed25519.PublicKey) (*Statement, error) {
	p, err := Parse(data)
	if err != nil {
		return nil, err
	}
	if err := p.VerifySignature(keys); err != nil {
		return nil, err
	}
	return &p.Statement, nil
}

// VerifySignature checks the parsed envelope's one signature with the
// trusted key its keyid names, through the dsse library's verifier.
func (p *Parsed) VerifySignature(keys map[string]ed25519.PublicKey) error {
	pub, ok := keys[p.KeyID]
	if !ok {
		return fail.Errorf(fail.Tamper, "envelope key %q is not a trusted key", p.KeyID)
	}
	v, err := dsse.NewEnvelopeVerifier(ed25519SV{pub: pub, id: p.KeyID})
	if err != nil {
		return err
	}
	if _, err := v.Verify(context.Background(), &p.env); err != nil {
		return fail.Errorf(fail.Tamper, "envelope signature by key %q does not verify", p.KeyID)
	}
	return nil
}

// strictB64 decodes padded standard base64 that is the canonical encoding
// of what it decodes to.
func strictB64(s string) ([]byte, bool) {
	raw, err := base64.StdEncoding.Strict().DecodeString(s)
	return raw, err == nil && base64.StdEncoding.EncodeToString(raw) == s
}
