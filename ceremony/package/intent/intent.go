// Package intent is the package activation intent
// qinglong/plugin-package-activation-intent@v1, the target identity it
// names (the active pointer's ConfigMap name and label) and the active.json
// document the pointer holds (docs/package-pointer.md).
//
// It is a pure format: no cluster client, no CAS, no OCI reader. Every read
// and every write goes through one normaliser, Normalize, so a value this
// package accepts is exactly a value it would write.
package intent

import (
	"fmt"
	"regexp"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/strictjson"
)

// Schema is the intent's schema member, exactly.
const Schema = "qinglong/plugin-package-activation-intent@v1"

// MaxGeneration is the largest generation: 2^53−1, the largest integer an
// RFC 8785 (IEEE 754 double) number holds exactly.
const MaxGeneration = 1<<53 - 1

// MaxIDLength bounds namespace, projectId and packageId (a DNS-1123 label).
const MaxIDLength = 63

// MaxReferenceLength bounds stageReference.
const MaxReferenceLength = 512

// MaxIntentBytes bounds an intent document as read from a file.
const MaxIntentBytes = 16 << 10

// Intent is one activation intent: activate lockDigest as generation
// Generation of package PackageID in project ProjectID, in Namespace of
// the cluster ClusterIdentity, from a verified stage. Its JSON member names
// are the document's; PreviousLockDigest is null only for generation 1.
type Intent struct {
	Schema                string  `json:"schema"`
	ClusterIdentity       string  `json:"clusterIdentity"`
	Namespace             string  `json:"namespace"`
	ProjectID             string  `json:"projectId"`
	PackageID             string  `json:"packageId"`
	Generation            int64   `json:"generation"`
	LockDigest            string  `json:"lockDigest"`
	PreviousLockDigest    *string `json:"previousLockDigest"`
	StageReference        string  `json:"stageReference"`
	StageReceiptDigest    string  `json:"stageReceiptDigest"`
	AdapterEvidenceDigest string  `json:"adapterEvidenceDigest"`
	ContentDigest         string  `json:"contentDigest"`
}

// members is the exact member set of an intent document.
var members = []string{
	"schema", "clusterIdentity", "namespace", "projectId", "packageId", "generation",
	"lockDigest", "previousLockDigest", "stageReference", "stageReceiptDigest",
	"adapterEvidenceDigest", "contentDigest",
}

var (
	// digestRE is a digest as every digest field holds it.
	digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	// labelRE is a DNS-1123 label (length checked separately).
	labelRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	// referenceRE is NAME@sha256:HEX, NAME an OCI distribution repository
	// name with an optional lowercase host[:port] first component.
	referenceRE = regexp.MustCompile(`^(` + hostPart + `/)?` + pathPart + `@(sha256:[0-9a-f]{64})$`)
	// nameRE is the NAME part alone (an allowlist entry may be a name).
	nameRE = regexp.MustCompile(`^(` + hostPart + `/)?` + pathPart + `$`)
)

const (
	hostPart = `[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*(:[0-9]{1,5})?`
	pathComp = `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*`
	pathPart = pathComp + `(/` + pathComp + `)*`
)

// Normalize is the one normaliser every read and write of an intent goes
// through: it checks every field of in against the v1 rules and returns a
// copy that owns its pointer. Errors are fail.Invalid and name the field.
// Normalize changes no value: an intent is accepted exactly or refused.
func Normalize(in Intent) (Intent, error) {
	out := in
	if in.PreviousLockDigest != nil {
		p := *in.PreviousLockDigest
		out.PreviousLockDigest = &p
	}
	if in.Schema != Schema {
		return Intent{}, invalidf("schema: %q, want %q", strictjson.Clip(in.Schema), Schema)
	}
	if err := checkDigest("clusterIdentity", in.ClusterIdentity); err != nil {
		return Intent{}, err
	}
	for _, f := range []struct{ name, v string }{{"namespace", in.Namespace}, {"projectId", in.ProjectID}, {"packageId", in.PackageID}} {
		if err := CheckID(f.name, f.v); err != nil {
			return Intent{}, err
		}
	}
	if in.Generation < 1 || in.Generation > MaxGeneration {
		return Intent{}, invalidf("generation: %d is out of range; write an integer from 1 to %d", in.Generation, int64(MaxGeneration))
	}
	if err := checkDigest("lockDigest", in.LockDigest); err != nil {
		return Intent{}, err
	}
	switch {
	case in.Generation == 1 && in.PreviousLockDigest != nil:
		return Intent{}, invalidf("previousLockDigest: must be null for generation 1 (there is no previous active lock)")
	case in.Generation > 1 && in.PreviousLockDigest == nil:
		return Intent{}, invalidf("previousLockDigest: null is allowed only for generation 1; write the lock digest generation %d replaces", in.Generation)
	case in.PreviousLockDigest != nil:
		if err := checkDigest("previousLockDigest", *in.PreviousLockDigest); err != nil {
			return Intent{}, err
		}
	}
	if err := CheckReference("stageReference", in.StageReference); err != nil {
		return Intent{}, err
	}
	for _, f := range []struct{ name, v string }{
		{"stageReceiptDigest", in.StageReceiptDigest},
		{"adapterEvidenceDigest", in.AdapterEvidenceDigest},
		{"contentDigest", in.ContentDigest},
	} {
		if err := checkDigest(f.name, f.v); err != nil {
			return Intent{}, err
		}
	}
	return out, nil
}

// CheckID checks a namespace, project or package id: a DNS-1123 label of
// 1 to 63 characters (lowercase letters, digits and '-', starting and
// ending with a letter or digit).
func CheckID(field, v string) error {
	if len(v) == 0 || len(v) > MaxIDLength || !labelRE.MatchString(v) {
		return invalidf("%s: %q is not a DNS-1123 label (1-%d of a-z, 0-9 and '-', starting and ending with a letter or digit)", field, strictjson.Clip(v), MaxIDLength)
	}
	return nil
}

// CheckReference checks a stage reference: NAME@sha256:HEX, at most
// MaxReferenceLength bytes (docs/package-pointer.md).
func CheckReference(field, v string) error {
	if len(v) > MaxReferenceLength || !referenceRE.MatchString(v) {
		return invalidf("%s: %q is not an OCI reference pinned by digest (NAME@sha256:<64 hex>, at most %d bytes)", field, strictjson.Clip(v), MaxReferenceLength)
	}
	return nil
}

// CheckName checks a bare repository name, the NAME of a stage reference.
func CheckName(field, v string) error {
	if len(v) > MaxReferenceLength || !nameRE.MatchString(v) {
		return invalidf("%s: %q is not an OCI repository name", field, strictjson.Clip(v))
	}
	return nil
}

// SplitReference splits a valid stage reference into its NAME and its
// manifest digest.
func SplitReference(ref string) (name, digest string, err error) {
	if err := CheckReference("stageReference", ref); err != nil {
		return "", "", err
	}
	m := referenceRE.FindStringSubmatch(ref)
	digest = m[len(m)-1]
	return ref[:len(ref)-len(digest)-1], digest, nil
}

func checkDigest(field, v string) error {
	if !digestRE.MatchString(v) {
		return invalidf("%s: %q is not a digest (sha256: and 64 lowercase hex digits)", field, strictjson.Clip(v))
	}
	return nil
}

func invalidf(format string, args ...any) error {
	return fail.Errorf(fail.Invalid, "intent: "+format, args...)
}

// String is a one-line summary for messages.
func (in Intent) String() string {
	return fmt.Sprintf("%s/%s/%s generation %d", in.Namespace, in.ProjectID, in.PackageID, in.Generation)
}
