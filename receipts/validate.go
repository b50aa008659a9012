package receipts

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

func fieldErr(field, format string, args ...any) error {
	return fail.Errorf(fail.Tamper, "receipt field %q: %s", field, fmt.Sprintf(format, args...))
}

func checkDigest(field, v string) error {
	if !canon.IsDigest(v) {
		return fieldErr(field, "%q is not a digest (\"sha256:\" and 64 lowercase hex digits)", v)
	}
	return nil
}

func checkText(field, v string) error {
	switch {
	case v == "":
		return fieldErr(field, "is empty")
	case !utf8.ValidString(v):
		return fieldErr(field, "is not valid UTF-8")
	}
	return nil
}

// validate checks every rule of docs/receipts.md that one receipt can be
// checked against on its own. Given r's encoding, it also checks selfDigest
// against it; without, it leaves selfDigest alone (Seal).
func (r *Receipt) validate(enc encoded) error {
	for _, check := range []func() error{
		r.validateTransition,
		func() error { return r.validateInventory(enc) },
		r.checkPrevious,
		r.validateFields,
		func() error {
			if err := CheckApproval(r.Generation, r.ApprovalPolicy, r.Approval); err != nil {
				return fail.Errorf(fail.Tamper, "receipt: %v", err)
			}
			return nil
		},
		func() error { return r.validateSelf(enc) },
	} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// validateTransition: the schema, the generation and what moved the Head.
func (r *Receipt) validateTransition() error {
	if r.Schema != Schema {
		return fieldErr("schema", "%q is not %q", r.Schema, Schema)
	}
	if r.Generation < 1 || r.Generation > maxSafeInteger {
		return fieldErr("generation", "%d is not between 1 and %d", r.Generation, int64(maxSafeInteger))
	}
	t := r.Transition
	switch t.Kind {
	case KindInstall, KindUpgrade, KindRollback, KindRetire:
	default:
		return fieldErr("transition.kind", "%q is not install, upgrade, rollback or retire", t.Kind)
	}
	if err := checkRetired(t.Kind, r.Retired); err != nil {
		return err
	}
	if err := CheckSupersedes(r.Generation, t); err != nil {
		return err
	}
	if err := checkDigest("transition.commandDigest", t.CommandDigest); err != nil {
		return err
	}
	return checkDigest("transition.preflightDigest", t.PreflightDigest)
}

// validateInventory: the deployment and the inventory it counts and digests.
func (r *Receipt) validateInventory(enc encoded) error {
	if err := checkDeployment("deployment", r.Deployment); err != nil {
		return err
	}
	if err := checkInventory(r.Inventory); err != nil {
		return err
	}
	if len(r.Inventory) != r.Deployment.InventoryCount {
		return fieldErr("deployment.inventoryCount", "%d, but the inventory lists %d identities", r.Deployment.InventoryCount, len(r.Inventory))
	}
	invDigest, err := inventoryDigest(r.Inventory, enc.inventory)
	if err != nil {
		return fieldErr("inventory", "%v", err)
	}
	if invDigest != r.Deployment.InventoryDigest {
		return fieldErr("deployment.inventoryDigest", "%q, but the listed inventory digests to %q", r.Deployment.InventoryDigest, invDigest)
	}
	return nil
}

// validateFields: the Head, target, steps, tool and flags.
func (r *Receipt) validateFields() error {
	for _, d := range []struct{ field, v string }{
		{"head.deploymentDigest", r.Head.DeploymentDigest},
		{"head.stateDigest", r.Head.StateDigest},
		{"target.clusterIdentity", r.Target.ClusterIdentity},
		{"steps.identity", r.Steps.Identity},
		{"steps.dryRun", r.Steps.DryRun},
		{"steps.apply", r.Steps.Apply},
		{"steps.converge", r.Steps.Converge},
		{"steps.finalIdentity", r.Steps.FinalIdentity},
	} {
		if err := checkDigest(d.field, d.v); err != nil {
			return err
		}
	}
	if !namespaceRE.MatchString(r.Target.Namespace) {
		return fieldErr("target.namespace", "%q is not a namespace name (RFC 1123 label)", r.Target.Namespace)
	}
	for _, s := range []struct{ field, v string }{
		{"tool.name", r.Tool.Name},
		{"tool.version", r.Tool.Version},
		{"tool.fieldManager", r.Tool.FieldManager},
	} {
		if err := checkText(s.field, s.v); err != nil {
			return err
		}
	}
	if r.Flags != ExpectedFlags {
		return fieldErr("flags", "%+v are not the required %+v", r.Flags, ExpectedFlags)
	}
	return nil
}

// validateSelf: a sealed receipt's selfDigest is the digest of its bytes
// without it (nothing to check while it is being sealed).
func (r *Receipt) validateSelf(enc encoded) error {
	if enc.full == nil {
		return nil
	}
	if err := checkDigest("selfDigest", r.SelfDigest); err != nil {
		return err
	}
	if self := canon.DigestBytes(canon.DomainReceipt, enc.unsealed); self != r.SelfDigest {
		return fieldErr("selfDigest", "%q, but the receipt digests to %q", r.SelfDigest, self)
	}
	return nil
}

func inventoryDigest(ids []canon.Identity, canonical []byte) (string, error) {
	if canonical == nil {
		return canon.InventoryDigest(ids)
	}
	return canon.DigestBytes(canon.DomainInventory, canonical), nil
}

func checkDeployment(field string, d Deployment) error {
	if !isSemVer(d.Version) {
		return fieldErr(field+".version", "%q is not a SemVer 2.0.0 version (no leading \"v\")", d.Version)
	}
	if err := checkDigest(field+".lockDigest", d.LockDigest); err != nil {
		return err
	}
	if err := checkDigest(field+".inventoryDigest", d.InventoryDigest); err != nil {
		return err
	}
	if d.InventoryCount < 0 {
		return fieldErr(field+".inventoryCount", "%d is negative", d.InventoryCount)
	}
	return nil
}

func checkInventory(ids []canon.Identity) error {
	if ids == nil {
		return fieldErr("inventory", "is null; an empty inventory is []")
	}
	for i, id := range ids {
		for _, s := range []struct{ field, v string }{
			{"apiVersion", id.APIVersion}, {"kind", id.Kind}, {"name", id.Name},
		} {
			if err := checkText(fmt.Sprintf("inventory[%d].%s", i, s.field), s.v); err != nil {
				return err
			}
		}
		if !utf8.ValidString(id.Namespace) {
			return fieldErr(fmt.Sprintf("inventory[%d].namespace", i), "is not valid UTF-8")
		}
	}
	if err := canon.CheckSortedUnique(ids); err != nil {
		return fieldErr("inventory", "%v", err)
	}
	return nil
}

// checkRetired checks the retired list: present (non-empty) exactly on a
// retire, sorted and unique by identity, each entry with a final outcome,
// and UID and resourceVersion both set or (recorded absent) both empty,
// in which case nothing was deleted: the outcome is "already absent", or
// "left: recreated" when the name held a new object at apply.
func checkRetired(kind string, rs []Retired) error {
	if kind != KindRetire {
		if rs != nil {
			return fieldErr("retired", "is set on a %s; only a retire lists retired objects", kind)
		}
		return nil
	}
	if len(rs) == 0 {
		return fieldErr("retired", "is missing or empty on a retire")
	}
	ids := make([]canon.Identity, len(rs))
	for i, x := range rs {
		f := fmt.Sprintf("retired[%d]", i)
		for _, s := range []struct{ field, v string }{
			{"apiVersion", x.ID.APIVersion}, {"kind", x.ID.Kind}, {"name", x.ID.Name},
		} {
			if err := checkText(f+".id."+s.field, s.v); err != nil {
				return err
			}
		}
		if !utf8.ValidString(x.ID.Namespace) || !utf8.ValidString(x.UID) || !utf8.ValidString(x.ResourceVersion) {
			return fieldErr(f, "is not valid UTF-8")
		}
		if !IsFinalOutcome(x.Outcome) {
			return fieldErr(f+".outcome", "%q is not %q, %q, %q or %q", x.Outcome, OutcomeDeleted, OutcomeAlreadyAbsent, OutcomeLeftRecreated, OutcomeLeftChanged)
		}
		switch {
		case (x.UID == "") != (x.ResourceVersion == ""):
			return fieldErr(f, "uid and resourceVersion must both be set, or both empty (absent at preflight)")
		case x.UID == "" && x.Outcome != OutcomeAlreadyAbsent && x.Outcome != OutcomeLeftRecreated:
			return fieldErr(f+".outcome", "%q for an object recorded absent at preflight; want %q or %q", x.Outcome, OutcomeAlreadyAbsent, OutcomeLeftRecreated)
		}
		if err := CheckReviewedDigest(x); err != nil {
			return fieldErr(f+".reviewedDigest", "%v", err)
		}
		ids[i] = x.ID
	}
	if err := canon.CheckSortedUnique(ids); err != nil {
		return fieldErr("retired", "%v", err)
	}
	return nil
}

// checkPrevious ties the transition kind, the generation and the previous
// deployment together: install is generation 1 and has no predecessor;
// upgrade and rollback are later generations and name theirs.
func (r *Receipt) checkPrevious() error {
	kind, prev := r.Transition.Kind, r.PreviousDeployment
	if r.Generation == 1 {
		if kind != KindInstall {
			return fieldErr("transition.kind", "%q at generation 1; the first generation is always an install", kind)
		}
		if prev != nil {
			return fieldErr("previousDeployment", "is set at generation 1")
		}
		if r.PreviousReceiptDigest != "" {
			return fieldErr("previousReceiptDigest", "%q at generation 1; it must be empty", r.PreviousReceiptDigest)
		}
		return nil
	}
	if kind == KindInstall {
		return fieldErr("transition.kind", "install at generation %d; install is generation 1 only", r.Generation)
	}
	if prev == nil {
		return fieldErr("previousDeployment", "is missing at generation %d", r.Generation)
	}
	if err := checkDeployment("previousDeployment", *prev); err != nil {
		return err
	}
	if err := checkDigest("previousReceiptDigest", r.PreviousReceiptDigest); err != nil {
		return err
	}
	switch kind {
	case KindUpgrade:
		if compareSemVer(r.Deployment.Version, prev.Version) <= 0 {
			return fieldErr("deployment.version", "upgrade to %q is not above the previous %q", r.Deployment.Version, prev.Version)
		}
	case KindRetire:
		if compareSemVer(r.Deployment.Version, prev.Version) <= 0 {
			return fieldErr("deployment.version", "retire to %q is not above the previous %q", r.Deployment.Version, prev.Version)
		}
		if r.Deployment.InventoryCount+len(r.Retired) != prev.InventoryCount {
			return fieldErr("deployment.inventoryCount", "retire keeps %d and retires %d object(s), but the previous deployment has %d", r.Deployment.InventoryCount, len(r.Retired), prev.InventoryCount)
		}
	case KindRollback:
		// A rollback keeps the objects, compared by group, kind, namespace
		// and name; it may return one to the apiVersion it had, so the
		// digests may differ. The audit compares the objects with the
		// previous receipt's inventory (checkChain); alone, a receipt can
		// only show that the number of objects is kept.
		if r.Deployment.InventoryCount != prev.InventoryCount {
			return fieldErr("deployment.inventoryCount", "rollback changes the number of objects (%d, previous %d)", r.Deployment.InventoryCount, prev.InventoryCount)
		}
		// A rollback that supersedes returns to the last committed
		// deployment, which is its previous one (docs/ceremony.md §7.5).
		if r.Transition.Supersedes != nil && r.Deployment != *prev {
			return fieldErr("deployment", "a rollback that supersedes generation(s) %v returns to the last committed deployment, previousDeployment, but deploys %s (lock %s)", SupersededGenerations(r.Transition), r.Deployment.Version, r.Deployment.LockDigest)
		}
	}
	return nil
}

// CheckReviewedDigest checks x.reviewedDigest wherever a retired entry is
// read (preflight record, Head, receipt): optional (records written before
// it existed lack it), a digest when present, and only on an object the
// preflight read (a uid).
func CheckReviewedDigest(x Retired) error {
	switch {
	case x.ReviewedDigest == "":
		return nil
	case x.UID == "":
		return errors.New("is set on an object recorded absent at preflight")
	case !canon.IsDigest(x.ReviewedDigest):
		return fmt.Errorf("%q is not a digest", x.ReviewedDigest)
	}
	return nil
}

// CheckRetired checks a committed retired list as a receipt of kind would
// carry it (docs/receipts.md, "retired"); every failure is fail.Tamper.
func CheckRetired(kind string, rs []Retired) error { return checkRetired(kind, rs) }
