// Package receipts holds the deployment receipt: its model, its canonical
// bytes and digests, the no-replace publish, and the offline audit. It never
// talks to a cluster (docs/receipts.md).
package receipts

import "github.com/qinglong/kubectl-ql3/inventory/canon"

// Schema is the receipt schema this package writes and audits.
const Schema = "qinglong/deployment-receipt@v2"

// The flags every receipt carries, exactly.
const (
	RecoveryResumeExact = "resume_exact_transition_from_target_head"
)

// Receipt is the proof of one committed deployment. Its canonical JSON
// (RFC 8785) is the file's exact bytes; SelfDigest is the "receipt"-domain
// digest of the canonical receipt without selfDigest.
type Receipt struct {
	Schema                string           `json:"schema"`
	Generation            int64            `json:"generation"`
	Transition            Transition       `json:"transition"`
	Deployment            Deployment       `json:"deployment"`
	Inventory             []canon.Identity `json:"inventory"`
	PreviousDeployment    *Deployment      `json:"previousDeployment"`
	PreviousReceiptDigest string           `json:"previousReceiptDigest"`
	Head                  HeadRef          `json:"head"`
	Target                Target           `json:"target"`
	Tool                  Tool             `json:"tool"`
	Steps                 Steps            `json:"steps"`
	Flags                 Flags            `json:"flags"`
	// Retired lists the objects a retire transition removed, sorted by
	// identity; the member is absent from every other receipt, whose bytes
	// are therefore exactly those of receipts written before retirement.
	Retired []Retired `json:"retired,omitempty"`
	// ApprovalPolicy and Approval are the Head's (docs/head.md §2, the
	// two-person rule): absent when not set, so every receipt without the
	// rule is byte for byte what it was before.
	ApprovalPolicy string    `json:"approvalPolicy,omitempty"`
	Approval       *Approval `json:"approval,omitempty"`
	SelfDigest     string    `json:"selfDigest"`
}

// Retired is one object of a retire transition: the UID and
// resourceVersion the preflight read (both empty when the object was
// already gone then) and what became of it.
type Retired struct {
	ID              canon.Identity `json:"id"`
	UID             string         `json:"uid"`
	ResourceVersion string         `json:"resourceVersion"`
	// ReviewedDigest is the digest of the object as the preflight read it,
	// less what controllers and the API server change without anyone
	// changing the object (docs/ceremony.md §11.2): apply deletes it only
	// while this digest still holds. Empty when absent at preflight, and
	// in records written before it existed.
	ReviewedDigest string `json:"reviewedDigest,omitempty"`
	Outcome        string `json:"outcome"`
}

// Outcomes of a retired object.
const (
	// OutcomePending is an object still to be deleted (preflight records,
	// applying Heads); never in a receipt.
	OutcomePending = "pending"
	// OutcomeDeleted: our fenced delete was accepted and the object is gone.
	OutcomeDeleted = "deleted"
	// OutcomeAlreadyAbsent: the object was gone before our delete was sent
	// (at preflight, or when this transition's delete ran, e.g. one an
	// interrupted run of the same transition had sent).
	OutcomeAlreadyAbsent = "already absent"
	// OutcomeLeftRecreated: the name holds another object (another UID),
	// which was left alone and is not managed.
	OutcomeLeftRecreated = "left: recreated"
	// OutcomeLeftChanged: the object was changed after the preflight; the
	// operator chose `resume --leave-changed`; it stays, unmanaged.
	OutcomeLeftChanged = "left: changed"
)

// IsFinalOutcome says whether o may appear in a receipt.
func IsFinalOutcome(o string) bool {
	switch o {
	case OutcomeDeleted, OutcomeAlreadyAbsent, OutcomeLeftRecreated, OutcomeLeftChanged:
		return true
	}
	return false
}

// Transition is the exact transition a deployment made.
type Transition struct {
	Kind            string `json:"kind"` // install | upgrade | rollback | retire
	CommandDigest   string `json:"commandDigest"`
	PreflightDigest string `json:"preflightDigest"`
	ForceConflicts  bool   `json:"forceConflicts"`
	// Supersedes, on an upgrade or rollback that superseded applying
	// generations which could never converge (docs/ceremony.md §7.5), lists
	// them oldest first: the generations just below this one, none of
	// which has a receipt. Absent on every other transition, whose bytes
	// are therefore those written before superseding existed.
	Supersedes []Superseded `json:"supersedes,omitempty"`
}

// Superseded is one applying generation a later transition superseded:
// which transition it was (its command and preflight digests, the mutation
// id of the process that last held it) and when it was superseded.
type Superseded struct {
	Generation      int64  `json:"generation"`
	Kind            string `json:"kind"`
	Version         string `json:"version"`
	CommandDigest   string `json:"commandDigest"`
	PreflightDigest string `json:"preflightDigest"`
	MutationID      string `json:"mutationId"`
	// At is when the superseding transition took the Head (RFC 3339, UTC,
	// whole seconds: 2006-01-02T15:04:05Z).
	At string `json:"at"`
}

// Deployment names one deployed release.
type Deployment struct {
	Version         string `json:"version"` // SemVer 2.0.0, no leading v
	LockDigest      string `json:"lockDigest"`
	InventoryDigest string `json:"inventoryDigest"`
	InventoryCount  int    `json:"inventoryCount"`
}

// HeadRef ties the receipt to the committed Head it was built from.
type HeadRef struct {
	DeploymentDigest string `json:"deploymentDigest"`
	StateDigest      string `json:"stateDigest"`
}

// Target is the target authority.
type Target struct {
	ClusterIdentity string `json:"clusterIdentity"`
	Namespace       string `json:"namespace"`
}

// Tool is the tool authority.
type Tool struct {
	Name         string `json:"name"`
	Version      string `json:"version"`
	FieldManager string `json:"fieldManager"`
}

// Steps are the five step transcript digests.
type Steps struct {
	Identity      string `json:"identity"`
	DryRun        string `json:"dryRun"`
	Apply         string `json:"apply"`
	Converge      string `json:"converge"`
	FinalIdentity string `json:"finalIdentity"`
}

// Flags state what the ceremony does and does not promise.
type Flags struct {
	DeploymentHeadCas          bool   `json:"deploymentHeadCas"`
	ResourceInventoryClosed    bool   `json:"resourceInventoryClosed"`
	MultiResourceTransactional bool   `json:"multiResourceTransactional"`
	Recovery                   string `json:"recovery"`
}

// ExpectedFlags are the only flags a valid receipt carries.
var ExpectedFlags = Flags{
	DeploymentHeadCas:          true,
	ResourceInventoryClosed:    true,
	MultiResourceTransactional: false,
	Recovery:                   RecoveryResumeExact,
}
