package delivery

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

// Token rules (docs/worker.md, "The token").
const (
	MinTokenBytes = 16
	MaxTokenBytes = 4096
	// MinKeyBytes is the shortest token digest key accepted.
	MinKeyBytes = 32
)

// digestV2 is the v2 domain-separated SHA-256:
//
//	"sha256:" + hex(SHA-256("kubectl-ql3/" + domain + "/v2" + 0x00 + data))
func digestV2(domain string, data []byte) string {
	h := sha256.New()
	h.Write([]byte("kubectl-ql3/" + domain + "/" + Version + "\x00"))
	h.Write(data)
	return canon.DigestPrefix + hex.EncodeToString(h.Sum(nil))
}

// TargetDigest is the target identity digest:
//
//	digestV2("worker-credential-target", canonical(target))
//
// over the five members of Target (cluster identity, namespace, Secret
// name, data key, Deployment name).
func TargetDigest(t Target) (string, error) {
	c, err := canon.Canonical(t)
	if err != nil {
		return "", err
	}
	return digestV2(DomainTarget, c), nil
}

// CheckToken validates a token's bytes: MinTokenBytes..MaxTokenBytes of
// visible ASCII (0x21–0x7e). The error never shows a byte of it.
func CheckToken(tok []byte) error {
	if len(tok) < MinTokenBytes || len(tok) > MaxTokenBytes {
		return fail.Errorf(fail.Invalid, "token: %d bytes; want %d to %d", len(tok), MinTokenBytes, MaxTokenBytes)
	}
	for i, b := range tok {
		if b < 0x21 || b > 0x7e {
			return fail.Errorf(fail.Invalid, "token: byte %d is not visible ASCII (no space, control or non-ASCII byte is allowed)", i+1)
		}
	}
	return nil
}

// TrimToken strips one final "\n" (or "\r\n") a file or stdin ends with.
func TrimToken(b []byte) []byte {
	n := len(b)
	if n > 0 && b[n-1] == '\n' {
		n--
		if n > 0 && b[n-1] == '\r' {
			n--
		}
	}
	return b[:n]
}

// TokenDigest is the keyed token digest the PodTemplate carries:
//
//	"hmac-sha256:" + hex(HMAC-SHA256(key, "kubectl-ql3/worker-credential-token/v2" + 0x00 + targetDigest + 0x00 + credentialId + 0x00 + token))
//
// The key (at least MinKeyBytes, never written anywhere) makes an offline
// guess of a weak token from the annotation impossible without it.
func TokenDigest(key []byte, targetDigest, credentialID string, tok []byte) (string, error) {
	if len(key) < MinKeyBytes {
		return "", fail.Errorf(fail.Invalid, "token digest key: %d bytes, want at least %d", len(key), MinKeyBytes)
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte("kubectl-ql3/" + DomainToken + "/" + Version))
	for _, p := range [][]byte{[]byte(targetDigest), []byte(credentialID), tok} {
		m.Write([]byte{0})
		m.Write(p)
	}
	return "hmac-sha256:" + hex.EncodeToString(m.Sum(nil)), nil
}

// Publication is what the publication digest covers.
type Publication struct {
	Target       string  `json:"target"`
	DeliveryID   string  `json:"deliveryId"`
	CredentialID string  `json:"credentialId"`
	Predecessor  *string `json:"predecessorCredentialId"`
	Generation   int64   `json:"deploymentGeneration"`
	TokenDigest  string  `json:"tokenDigest"`
}

// PublicationDigest is
//
//	digestV2("worker-credential-publication", canonical({target, deliveryId,
//	    credentialId, predecessorCredentialId, deploymentGeneration, tokenDigest}))
//
// with target the target identity digest.
func PublicationDigest(p Publication) (string, error) {
	c, err := canon.Canonical(p)
	if err != nil {
		return "", err
	}
	return digestV2(DomainPublication, c), nil
}

// Stamp is the five annotation values of a delivery with a token digest.
type Stamp map[string]string

// StampOf computes the target, publication and the five annotations of d
// for a token whose keyed digest is tokenDigest.
func StampOf(d *Delivery, tokenDigest string) (Stamp, string, error) {
	td, err := TargetDigest(d.Target)
	if err != nil {
		return nil, "", err
	}
	pd, err := PublicationDigest(Publication{Target: td, DeliveryID: d.DeliveryID, CredentialID: d.CredentialID, Predecessor: d.Predecessor, Generation: d.Generation, TokenDigest: tokenDigest})
	if err != nil {
		return nil, "", err
	}
	return Stamp{
		AnnotationDeliveryID:        d.DeliveryID,
		AnnotationCredentialID:      d.CredentialID,
		AnnotationGeneration:        GenerationString(d.Generation),
		AnnotationTokenDigest:       tokenDigest,
		AnnotationPublicationDigest: pd,
	}, td, nil
}

// DeliveryDigest binds a stage Secret to the exact delivery file content:
//
//	digestV2("worker-credential-delivery", canonical(delivery))
func DeliveryDigest(d *Delivery) (string, error) {
	c, err := canon.Canonical(d)
	if err != nil {
		return "", err
	}
	return digestV2(DomainDelivery, c), nil
}

// DomainDelivery is the digest domain of a delivery's canonical JSON.
const DomainDelivery = "worker-credential-delivery"

// Canonical is d's RFC 8785 canonical JSON; it is itself a valid delivery
// file.
func Canonical(d *Delivery) ([]byte, error) { return canon.Canonical(d) }
