package intent

import (
	"bytes"
	"regexp"
	"time"

	"github.com/qinglong/kubectl-ql3/internal/strictjson"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

// Schemas of the active pointer's document and its receipt.
const (
	ActiveSchema  = "qinglong/plugin-package-active@v1"
	ReceiptSchema = "qinglong/plugin-package-activation-receipt@v1"
)

// MaxActiveBytes bounds active.json: 32 KiB.
const MaxActiveBytes = 32 << 10

// Active is active.json, the whole data of a package's active pointer: the
// intent now active on ClusterIdentity and the receipt of its activation.
type Active struct {
	Schema          string  `json:"schema"`
	ClusterIdentity string  `json:"clusterIdentity"`
	Intent          Intent  `json:"intent"`
	Receipt         Receipt `json:"receipt"`
}

// Receipt records one activation: which intent, for which target, when.
type Receipt struct {
	Schema       string `json:"schema"`
	IntentDigest string `json:"intentDigest"`
	TargetDigest string `json:"targetDigest"`
	// ActivatedAt is UTC in RFC 3339 with whole seconds: 2026-07-24T09:30:00Z.
	ActivatedAt string `json:"activatedAt"`
}

var (
	activeMembers  = []string{"schema", "clusterIdentity", "intent", "receipt"}
	receiptMembers = []string{"schema", "intentDigest", "targetDigest", "activatedAt"}
	timeRE         = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$`)
)

// BuildActive is the active.json of in activated at: its canonical JSON
// (RFC 8785), which is also the only form ParseActive accepts.
func BuildActive(in Intent, at time.Time) (*Active, []byte, error) {
	n, err := Normalize(in)
	if err != nil {
		return nil, nil, err
	}
	id, err := Digest(n)
	if err != nil {
		return nil, nil, err
	}
	nm, err := NamingOf(n)
	if err != nil {
		return nil, nil, err
	}
	a := &Active{
		Schema:          ActiveSchema,
		ClusterIdentity: n.ClusterIdentity,
		Intent:          n,
		Receipt:         Receipt{Schema: ReceiptSchema, IntentDigest: id, TargetDigest: nm.TargetDigest, ActivatedAt: at.UTC().Format(time.RFC3339)},
	}
	data, err := a.Encode()
	if err != nil {
		return nil, nil, err
	}
	return a, data, nil
}

// Encode checks a and returns its canonical JSON.
func (a *Active) Encode() ([]byte, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	data, err := canon.Canonical(a)
	if err != nil {
		return nil, err
	}
	if len(data) > MaxActiveBytes {
		return nil, invalidf("active.json: %d bytes, at most %d are allowed", len(data), MaxActiveBytes)
	}
	return data, nil
}

// ParseActive reads active.json: at most MaxActiveBytes, exactly the
// members of Active and Receipt, the intent as Parse reads it, the
// receipt bound to that intent (intent digest, target digest, the same
// cluster identity), and the bytes in canonical form. Errors are
// fail.Invalid; the pointer's reader decides what an invalid pointer means.
func ParseActive(data []byte) (*Active, error) {
	if len(data) > MaxActiveBytes {
		return nil, invalidf("active.json: %d bytes, at most %d are allowed", len(data), MaxActiveBytes)
	}
	top, err := strict.Object("active.json", data, activeMembers)
	if err != nil {
		return nil, err
	}
	a := &Active{}
	if a.Schema, err = strict.String("active.json: schema", top["schema"]); err != nil {
		return nil, err
	}
	if a.ClusterIdentity, err = strict.String("active.json: clusterIdentity", top["clusterIdentity"]); err != nil {
		return nil, err
	}
	if a.Intent, err = parseIntent("active.json: intent", top["intent"]); err != nil {
		return nil, err
	}
	rm, err := strict.Object("active.json: receipt", top["receipt"], receiptMembers)
	if err != nil {
		return nil, err
	}
	for _, f := range []struct {
		name string
		dst  *string
	}{{"schema", &a.Receipt.Schema}, {"intentDigest", &a.Receipt.IntentDigest}, {"targetDigest", &a.Receipt.TargetDigest}, {"activatedAt", &a.Receipt.ActivatedAt}} {
		if *f.dst, err = strict.String("active.json: receipt."+f.name, rm[f.name]); err != nil {
			return nil, err
		}
	}
	canonical, err := a.Encode()
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(canonical, data) {
		return nil, invalidf("active.json: not in canonical form (RFC 8785); it is written only by BuildActive")
	}
	return a, nil
}

// check validates a and binds its receipt to its intent.
func (a *Active) check() error {
	if a.Schema != ActiveSchema {
		return invalidf("active.json: schema: %q, want %q", strictjson.Clip(a.Schema), ActiveSchema)
	}
	n, err := Normalize(a.Intent)
	if err != nil {
		return err
	}
	if a.ClusterIdentity != n.ClusterIdentity {
		return invalidf("active.json: clusterIdentity %q differs from the intent's %s", strictjson.Clip(a.ClusterIdentity), n.ClusterIdentity)
	}
	r := a.Receipt
	if r.Schema != ReceiptSchema {
		return invalidf("active.json: receipt.schema: %q, want %q", strictjson.Clip(r.Schema), ReceiptSchema)
	}
	id, _ := Digest(n)
	if r.IntentDigest != id {
		return invalidf("active.json: receipt.intentDigest %q is not the intent's digest %s", strictjson.Clip(r.IntentDigest), id)
	}
	nm, _ := NamingOf(n)
	if r.TargetDigest != nm.TargetDigest {
		return invalidf("active.json: receipt.targetDigest %q is not the intent's target %s", strictjson.Clip(r.TargetDigest), nm.TargetDigest)
	}
	if t, err := time.Parse(time.RFC3339, r.ActivatedAt); !timeRE.MatchString(r.ActivatedAt) || err != nil || t.Year() < 1970 {
		return invalidf("active.json: receipt.activatedAt: %q is not a UTC time like 2026-07-24T09:30:00Z", strictjson.Clip(r.ActivatedAt))
	}
	return nil
}
