// Package delivery is the worker credential delivery (ADR-0239,
// docs/worker.md): the strict delivery file, the token rules, the five
// PodTemplate annotations and the three v2 digests of a delivery — the
// target identity, the keyed token digest and the publication digest.
//
// It is a pure format leaf: no client-go, no CAS kernel, no ceremony, no
// plugin. It never prints, logs or returns a token in an error.
package delivery

import (
	"fmt"
	"regexp"
	"strconv"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/strictjson"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

// Schema is the delivery file's schema member.
const Schema = "qinglong/worker-credential-delivery@v1"

// The fixed target names (ADR-0239 §1).
const (
	// SecretName is the credential Secret the delivery publishes into.
	SecretName = "ql3-worker-credential"
	// SecretKey is its one data key.
	SecretKey = "credential-token"
	// IdentitySecret is the TLS identity Secret: never read, never written.
	IdentitySecret = "ql3-worker-identity"
)

// The five PodTemplate annotations publish adds (docs/worker.md).
const (
	AnnotationDeliveryID        = "qinglong.io/worker-credential-delivery-id"
	AnnotationCredentialID      = "qinglong.io/worker-credential-id"
	AnnotationGeneration        = "qinglong.io/worker-deployment-generation"
	AnnotationTokenDigest       = "qinglong.io/worker-credential-token-digest"
	AnnotationPublicationDigest = "qinglong.io/worker-credential-publication-digest"
	// AnnotationIdentityGeneration is the identity rollout annotation the
	// release owns; publish never changes it.
	AnnotationIdentityGeneration = "qinglong.io/worker-identity-generation"
	// IdentityPlaceholder is the base value a deployable overlay replaces.
	IdentityPlaceholder = "replace-in-private-overlay"
)

// Annotations lists the five credential annotations, in a fixed order.
var Annotations = []string{AnnotationDeliveryID, AnnotationCredentialID, AnnotationGeneration, AnnotationTokenDigest, AnnotationPublicationDigest}

// Limits.
const (
	// MaxFileBytes bounds a delivery file.
	MaxFileBytes = 16 << 10
	// MaxIDLen bounds a delivery or credential id, so that the stage
	// Secret's name (StagePrefix + id) is a valid Secret name.
	MaxIDLen = 40
	// MaxGeneration bounds deploymentGeneration (exact in a double).
	MaxGeneration = 1<<53 - 1
	// StagePrefix starts every stage Secret's name.
	StagePrefix = "ql3-worker-stage-"
)

// Digest domains (docs/digests.md). All three carry the version v2.
const (
	DomainTarget      = "worker-credential-target"
	DomainToken       = "worker-credential-token"
	DomainPublication = "worker-credential-publication"
	// Version is the domain version of the worker digests.
	Version = "v2"
)

// Target is where a delivery publishes.
type Target struct {
	// ClusterIdentity is the cluster's identity digest (kubectl ql3 version).
	ClusterIdentity string `json:"clusterIdentity"`
	Namespace       string `json:"namespace"`
	Secret          string `json:"secret"`
	Key             string `json:"key"`
	Deployment      string `json:"deployment"`
}

// Delivery is one validated delivery file.
type Delivery struct {
	Schema       string `json:"schema"`
	DeliveryID   string `json:"deliveryId"`
	CredentialID string `json:"credentialId"`
	// Predecessor is the credential id the PodTemplate must carry now; nil
	// only for the first delivery (the PodTemplate carries none of the five
	// annotations).
	Predecessor *string `json:"predecessorCredentialId"`
	// Generation is the deployment generation; strictly greater than the
	// PodTemplate's current one.
	Generation int64  `json:"deploymentGeneration"`
	Target     Target `json:"target"`
}

var (
	idRE   = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	nameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	nsRE   = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
)

func invalidf(format string, args ...any) error {
	return fail.Errorf(fail.Invalid, "delivery: "+format, args...)
}

// CheckID validates a delivery or credential id: a lowercase DNS label of at
// most MaxIDLen characters.
func CheckID(field, v string) error {
	if len(v) == 0 || len(v) > MaxIDLen || !idRE.MatchString(v) {
		return invalidf("%s %q: write lowercase letters, digits and '-' (starting and ending with a letter or digit), at most %d characters", field, strictjson.Clip(v), MaxIDLen)
	}
	return nil
}

// Validate checks every rule of a delivery (docs/worker.md, "The delivery
// file"). Errors are fail.Invalid and name the member.
func (d *Delivery) Validate() error {
	if d.Schema != Schema {
		return invalidf("schema %q: want %q", strictjson.Clip(d.Schema), Schema)
	}
	if err := CheckID("deliveryId", d.DeliveryID); err != nil {
		return err
	}
	if err := CheckID("credentialId", d.CredentialID); err != nil {
		return err
	}
	if d.Predecessor != nil {
		if err := CheckID("predecessorCredentialId", *d.Predecessor); err != nil {
			return err
		}
		if *d.Predecessor == d.CredentialID {
			return invalidf("predecessorCredentialId equals credentialId %q: a delivery replaces a credential with another", d.CredentialID)
		}
	}
	if d.Generation < 1 || d.Generation > MaxGeneration {
		return invalidf("deploymentGeneration %d: want 1 to %d", d.Generation, int64(MaxGeneration))
	}
	t := d.Target
	switch {
	case !canon.IsDigest(t.ClusterIdentity):
		return invalidf("target.clusterIdentity %q: want sha256: and 64 lowercase hex digits (kubectl ql3 version prints it)", strictjson.Clip(t.ClusterIdentity))
	case len(t.Namespace) > 63 || !nsRE.MatchString(t.Namespace):
		return invalidf("target.namespace %q is not a namespace name", strictjson.Clip(t.Namespace))
	case t.Secret != SecretName:
		return invalidf("target.secret %q: the credential Secret is always %q", strictjson.Clip(t.Secret), SecretName)
	case t.Key != SecretKey:
		return invalidf("target.key %q: the credential key is always %q", strictjson.Clip(t.Key), SecretKey)
	case len(t.Deployment) > 253 || !nameRE.MatchString(t.Deployment):
		return invalidf("target.deployment %q is not a Deployment name", strictjson.Clip(t.Deployment))
	}
	return nil
}

// StageName is the stage Secret's name of delivery id.
func StageName(deliveryID string) string { return StagePrefix + deliveryID }

// GenerationString is the annotation value of a generation.
func GenerationString(g int64) string { return strconv.FormatInt(g, 10) }

// ParseGeneration reads a generation annotation value: plain decimal
// digits, no sign or leading zero, 1..MaxGeneration.
func ParseGeneration(v string) (int64, error) {
	if !genRE.MatchString(v) {
		return 0, fmt.Errorf("%q is not a positive integer in plain decimal digits", strictjson.Clip(v))
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n > MaxGeneration {
		return 0, fmt.Errorf("%q is above %d", strictjson.Clip(v), int64(MaxGeneration))
	}
	return n, nil
}

var genRE = regexp.MustCompile(`^[1-9][0-9]{0,15}$`)
