package approval

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// ReviewRequest is approve --release DIR [--deployed DIR_OLD] (and
// reject): the release the approver reviewed, checked against the record
// before the decision is written, and what it changes.
type ReviewRequest struct {
	// Release is the release directory the approver reviewed.
	Release string
	// Deployed is the release directory the Head deploys (the Head's
	// current lock), to compare with; "" when nothing is deployed.
	Deployed string
	// Options render the releases as preflight does: FS, Inventory (the
	// secret policy), ToolVersion; the cluster (for kinds) is Clients'.
	Options deploy.Options
	// Changes is the change list from the deployed release's objects
	// (nil: nothing deployed) to the release's, of the record's namespace
	// and version: views.ReleaseChanges in the CLI (ceremony/approval does
	// not import the views).
	Changes func(deployed, release []*unstructured.Unstructured, ns, version string) (any, error)
	// Show, when set, is given the review once it is checked, before the
	// approval object is read or written.
	Show func(*Reviewed)
}

// Reviewed is what a review checked and showed.
type Reviewed struct {
	// Release and Deployed are the directories, as given.
	Release  string `json:"release"`
	Deployed string `json:"deployed,omitempty"`
	// Verified says what the release was checked against.
	Verified string `json:"verified"`
	// Changes is what Changes returned.
	Changes any `json:"changes"`
}

// notChecked is what approve and reject without --release did not check.
func notChecked(verb string) string {
	return fmt.Sprintf("content not checked: %s compared only the record's digests with the proposal; the release behind them was not rendered or verified, and what it changes was not shown: run %s with --release DIR (and --deployed DIR_OLD, the release the Head deploys) to check the release you reviewed is the one the record binds and see its changes", verb, verb)
}

// reviewRelease renders and verifies req.Release against the record of
// s, as apply will (deploy.VerifyPreflighted), and the deployed release
// against the Head the record expects (deploy.VerifyDeployed), then
// computes the changes. A release that is not the record's, or a deployed
// release that is not the Head's, is invalid input (exit 2), as apply
// classes a release that differs from its preflight: nothing is written.
func reviewRelease(c Clients, s Subject, req *ReviewRequest) (*Reviewed, error) {
	o := req.Options
	o.Cluster = c.Cluster
	rel, err := deploy.VerifyPreflighted(o, req.Release, s.rec)
	if err != nil {
		return nil, fail.Errorf(fail.ClassOf(err), "--release %s is not the release preflight %s binds: do not decide on it; review the release the proposer preflighted, or have them preflight and propose the one you reviewed (nothing was written): %w", req.Release, s.PreflightDigest, err)
	}
	var deployed []*unstructured.Unstructured
	switch {
	case s.head == nil && req.Deployed != "":
		return nil, fail.Errorf(fail.Invalid, "--deployed %s: nothing is deployed in namespace %s (the record installs): drop --deployed", req.Deployed, s.Namespace)
	case s.head != nil && req.Deployed == "":
		return nil, fail.Errorf(fail.Invalid, "--release needs --deployed DIR_OLD: the record moves the Head from generation %d (%s, lock %s); give that release's directory to see what this one changes", s.head.Generation, s.head.Current.Version, s.head.Current.LockDigest)
	case s.head != nil:
		if deployed, err = deploy.VerifyDeployed(o, req.Deployed, s.head); err != nil {
			return nil, fail.Errorf(fail.ClassOf(err), "--deployed: %w", err)
		}
	}
	changes, err := req.Changes(deployed, rel, s.Namespace, s.Version)
	if err != nil {
		return nil, err
	}
	verified := fmt.Sprintf("the release is preflight %s's: lock %s, source %s, render %s, inventory %s (%d objects)",
		s.PreflightDigest, s.rec.Release.LockDigest, s.rec.Release.SourceDigest, s.rec.Release.RenderDigest, s.rec.Release.InventoryDigest, s.rec.Release.InventoryCount)
	if s.head != nil {
		verified += fmt.Sprintf("; the deployed release is the Head's (generation %d, lock %s)", s.head.Generation, s.head.Current.LockDigest)
	}
	return &Reviewed{Release: req.Release, Deployed: req.Deployed, Verified: verified, Changes: changes}, nil
}
