package intoto

import (
	"bytes"
	"encoding/json"
	"fmt"

	v1 "github.com/in-toto/attestation/go/v1"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/strictjson"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

// Parse reads an envelope file strictly, without verifying its signature:
// canonical JSON of exactly {payload, payloadType, signatures}, payloadType
// PayloadType, exactly one signature {keyid, sig} with a non-empty keyid
// and 64 bytes of padded standard base64, a payload of padded standard
// base64 whose bytes are exactly the canonical Statement Seal would write
// from its parts (so no member, subject field or digest algorithm beyond
// those Seal writes). Every failure is fail.Tamper.
func Parse(data []byte) (*Parsed, error) {
	bad := func(format string, args ...any) (*Parsed, error) {
		return nil, fail.Errorf(fail.Tamper, "envelope: "+format, args...)
	}
	if len(data) == 0 || len(data) > MaxEnvelopeBytes {
		return bad("is empty or larger than %d bytes", MaxEnvelopeBytes)
	}
	if c, err := canon.CanonicalizeJSON(data); err != nil || !bytes.Equal(c, data) {
		return bad("is not canonical JSON (RFC 8785, no trailing newline)")
	}
	m, err := strictjson.Object(data, []string{"payload", "payloadType", "signatures"})
	if err != nil {
		return bad("%v", err)
	}
	var p Parsed
	var ok bool
	if p.env.PayloadType, ok = strictjson.String(m["payloadType"]); !ok || p.env.PayloadType != PayloadType {
		return bad("payloadType must be %q", PayloadType)
	}
	var sigs []json.RawMessage
	if err := json.Unmarshal(m["signatures"], &sigs); err != nil || len(sigs) != 1 {
		return bad("signatures must be an array of exactly one signature")
	}
	sm, err := strictjson.Object(sigs[0], []string{"keyid", "sig"})
	if err != nil {
		return bad("signature: %v", err)
	}
	var sig dsse.Signature
	if sig.KeyID, ok = strictjson.String(sm["keyid"]); !ok || sig.KeyID == "" {
		return bad("signature member %q must be a non-empty string", "keyid")
	}
	sig.Sig, _ = strictjson.String(sm["sig"])
	if raw, ok := strictB64(sig.Sig); !ok || len(raw) != 64 {
		return bad("signature member %q must be 64 bytes of padded standard base64", "sig")
	}
	p.env.Signatures, p.KeyID = []dsse.Signature{sig}, sig.KeyID
	p.env.Payload, _ = strictjson.String(m["payload"])
	payload, ok := strictB64(p.env.Payload)
	if !ok {
		return bad("payload must be padded standard base64")
	}
	st, err := statementOf(payload)
	if err != nil {
		return bad("payload: %v", err)
	}
	p.Statement = *st
	return &p, nil
}

// statementOf reads a payload as an in-toto Statement v1 and requires it
// to be exactly the bytes payloadOf writes from what it says.
func statementOf(payload []byte) (*Statement, error) {
	if _, err := strictjson.Object(payload, []string{"_type", "predicate", "predicateType", "subject"}); err != nil {
		return nil, err
	}
	var st v1.Statement
	if err := protojson.Unmarshal(payload, &st); err != nil {
		return nil, fmt.Errorf("not an in-toto Statement: %v", err)
	}
	if st.GetType() != StatementType {
		return nil, fmt.Errorf("_type %q is not %q", st.GetType(), StatementType)
	}
	out := &Statement{PredicateType: st.GetPredicateType()}
	for i, rd := range st.GetSubject() {
		d, ok := rd.GetDigest()["sha256"]
		if !ok {
			return nil, fmt.Errorf("subject %d (%q) has no sha256 digest", i, rd.GetName())
		}
		out.Subjects = append(out.Subjects, Subject{Name: rd.GetName(), SHA256: d})
	}
	raw, err := protojson.Marshal(st.GetPredicate())
	if err != nil {
		return nil, fmt.Errorf("predicate: %v", err)
	}
	if out.Predicate, err = canon.CanonicalizeJSON(raw); err != nil {
		return nil, fmt.Errorf("predicate: %v", err)
	}
	want, err := payloadOf(*out)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(want, payload) {
		return nil, fmt.Errorf("is not the canonical Statement of its subjects and predicate (a member, subject field or digest algorithm beyond name and sha256, or not RFC 8785)")
	}
	return out, nil
}
