package deploy

import (
	"fmt"
	"strings"

	"github.com/Masterminds/semver/v3"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
	"github.com/qinglong/kubectl-ql3/receipts"
)

// Target is the deployment a transition wants to reach.
type Target struct {
	Kind       string
	Deployment receipts.Deployment
	Inventory  []inventory.Identity // sorted
	// Supersedes, when set, is the applying generation this transition
	// supersedes (docs/ceremony.md §7.5); nil for every other transition.
	Supersedes *SupersedeIntent
}

// CheckTransition applies the Head rules of ceremony.md §5.3 (and, for a
// transition that supersedes an applying generation, §7.5) to the Head
// read from the cluster (nil when absent). It is pure: no cluster, no files.
// The subset rule of an upgrade and the equality rule of a rollback compare
// objects by group, kind, namespace and name (inventory.Key), so moving an
// object to another API version neither drops nor adds it.
//
// A Head that moved since the preflight, or one still applying, is a
// conflict; a transition the Head does not allow is invalid input.
func CheckTransition(h *Head, expected ExpectedHead, t Target) error {
	switch t.Kind {
	case TransitionInstall, TransitionUpgrade, TransitionRollback, TransitionRetire:
	default:
		return fail.Errorf(fail.Invalid, "--transition %q: want install, upgrade, rollback or retire", t.Kind)
	}
	if h == nil {
		if expected.Generation != 0 {
			return fail.Errorf(fail.Conflict, "head: absent, but the preflight expects generation %d (%s); the Head was removed: investigate before deploying", expected.Generation, expected)
		}
		if t.Supersedes != nil {
			return fail.Errorf(fail.Invalid, "--supersede %d: there is no Head, so nothing is applying: drop --supersede", t.Supersedes.Generation)
		}
		if t.Kind != TransitionInstall {
			return fail.Errorf(fail.Invalid, "head: absent: the first deployment must be --transition install, not %s", t.Kind)
		}
		return nil
	}
	if h.Phase == PhaseApplying && t.Supersedes == nil {
		tok := h.Expected()
		return fail.Errorf(fail.Conflict, "head: generation %[1]d is still applying (%[2]s %[3]s, mutation %[4]s): wait for that apply, or run `kubectl ql3 resume --preflight FILE` with its preflight; "+
			"if it can never converge, supersede it: `kubectl ql3 preflight DIR --transition upgrade|rollback --supersede %[1]d --expected-head %[5]s` or `kubectl ql3 rollback DIR --expected-head %[5]s --supersede %[1]d`",
			h.Generation, h.Transition.Kind, h.Current.Version, h.Transition.MutationID, tok)
	}
	if got := h.Expected(); got != expected {
		return fail.Errorf(fail.Conflict, "head: moved since the preflight: expected %s, found %s (generation %d, %s): run `kubectl ql3 head` and preflight again", expected, got, h.Generation, h.Current.Version)
	}
	if t.Supersedes != nil {
		if err := checkSupersede(h, t); err != nil {
			return err
		}
	}
	switch t.Kind {
	case TransitionInstall:
		return fail.Errorf(fail.Invalid, "head: the target already has deployment %s at generation %d: use --transition upgrade or rollback", h.Current.Version, h.Generation)
	case TransitionUpgrade:
		return checkUpgrade(h, t)
	case TransitionRetire:
		return checkRetire(h, t)
	case TransitionRollback:
		return checkRollback(h, t)
	}
	return nil
}

// checkSupersede is the rule of docs/ceremony.md §7.5 for the Head that
// matched the expected token: it is applying exactly the generation named,
// which is an upgrade or a rollback (an install has no committed deployment
// to return to; a retire's deletes are finished by resume), and the
// record's supersedes names that very transition.
func checkSupersede(h *Head, t Target) error {
	s := t.Supersedes
	switch {
	case t.Kind != TransitionUpgrade && t.Kind != TransitionRollback:
		return fail.Errorf(fail.Invalid, "--supersede with --transition %s: only an upgrade or a rollback supersedes an applying generation", t.Kind)
	case h.Phase != PhaseApplying:
		return fail.Errorf(fail.Invalid, "--supersede %d: generation %d is %s, not applying: nothing to supersede; preflight without --supersede", s.Generation, h.Generation, h.Phase)
	case s.Generation != h.Generation:
		return fail.Errorf(fail.Invalid, "--supersede %d: the Head is applying generation %d; name the applying generation", s.Generation, h.Generation)
	case h.Transition.Kind == TransitionInstall:
		return fail.Errorf(fail.Invalid, "--supersede %d: generation %d is an install: there is no committed deployment to return to or upgrade from; resume it", s.Generation, h.Generation)
	case h.Transition.Kind == TransitionRetire:
		return fail.Errorf(fail.Invalid, "--supersede %d: generation %d is a retire, whose deletes only its own resume finishes (docs/ceremony.md §11.4): resume it", s.Generation, h.Generation)
	case *s != supersedeIntentOf(h):
		return fail.Errorf(fail.Invalid, "preflight record: supersedes %+v does not name the transition the Head is applying (%+v): preflight again", *s, supersedeIntentOf(h))
	}
	return nil
}

// checkUpgrade: a greater version that keeps every object of the Head's
// current inventory. Superseding, the version is also above the last
// committed deployment (the Head's previous), which a rollback in flight
// may be below.
func checkUpgrade(h *Head, t Target) error {
	cur := h.Current
	to, err := semver.StrictNewVersion(t.Deployment.Version)
	if err != nil {
		return fail.Errorf(fail.Invalid, "release.version %q: %v", t.Deployment.Version, err)
	}
	type bound struct{ what, version string }
	bounds := []bound{{"the deployed", cur.Version}}
	if t.Supersedes != nil && h.Previous != nil {
		bounds = []bound{{"the superseded", cur.Version}, {"the last committed", h.Previous.Version}}
	}
	for _, b := range bounds {
		from, err := semver.StrictNewVersion(b.version)
		if err != nil {
			return fail.Errorf(fail.Tamper, "head: version %q: %v", b.version, err)
		}
		if !to.GreaterThan(from) {
			return fail.Errorf(fail.Invalid, "upgrade: release version %s is not greater than %s %s", to, b.what, from)
		}
	}
	if missing := inventory.Missing(cur.Inventory, t.Inventory); len(missing) > 0 {
		return fail.Errorf(fail.Invalid, "upgrade: the release omits %d live object(s) of %s, and kubectl-ql3 never prunes: %s", len(missing), cur.Version, canon.List(missing, 10))
	}
	return nil
}

// checkRollback: exactly the previous deployment, with the same objects
// as the Head's current inventory. Superseding, previous is the last
// committed deployment, so the rollback returns to it.
func checkRollback(h *Head, t Target) error {
	cur, prev := h.Current, h.Previous
	if prev == nil {
		return fail.Errorf(fail.Invalid, "rollback: the deployed %s has no previous deployment", cur.Version)
	}
	if h.Transition.Kind == TransitionRetire {
		return fail.Errorf(fail.Invalid, "rollback: generation %d retired %s; the inventories differ because of the retirement, and a rollback never re-creates objects: deploy them again with an upgrade", h.Generation, canon.List(retiredIDs(h.Retired), 10))
	}
	if t.Deployment.Version != prev.Version || t.Deployment.LockDigest != prev.LockDigest {
		return fail.Errorf(fail.Invalid, "rollback: target %s (lock %s) is not the exact previous deployment %s (lock %s)", t.Deployment.Version, t.Deployment.LockDigest, prev.Version, prev.LockDigest)
	}
	// Objects are compared by group, kind, namespace and name: a
	// rollback may return an object to the apiVersion the previous
	// deployment applied it in, but never add or drop one.
	if t.Deployment.InventoryDigest != prev.InventoryDigest {
		return fail.Errorf(fail.Invalid, "rollback: the target's inventory %s is not the previous deployment's %s", t.Deployment.InventoryDigest, prev.InventoryDigest)
	}
	if !inventory.SameObjects(cur.Inventory, t.Inventory) {
		return fail.Errorf(fail.Invalid, "rollback: inventories differ: %s; a rollback must not add or drop objects (objects compare by group, kind, namespace and name)", inventoryDiff(cur.Inventory, t.Inventory))
	}
	return nil
}

// checkRetire is the retire rule (docs/ceremony.md §11.1): a version above
// the deployed one; the target only removes objects (at least one); no
// retired object is the control namespace, the Namespace of a remaining
// object, or a CRD of an API group a remaining object still uses.
func checkRetire(h *Head, t Target) error {
	cur := h.Current
	from, err := semver.StrictNewVersion(cur.Version)
	if err != nil {
		return fail.Errorf(fail.Tamper, "head: current.version %q: %v", cur.Version, err)
	}
	to, err := semver.StrictNewVersion(t.Deployment.Version)
	if err != nil {
		return fail.Errorf(fail.Invalid, "release.version %q: %v", t.Deployment.Version, err)
	}
	if !to.GreaterThan(from) {
		return fail.Errorf(fail.Invalid, "retire: release version %s is not greater than the deployed %s", to, from)
	}
	if added := inventory.Missing(t.Inventory, cur.Inventory); len(added) > 0 {
		return fail.Errorf(fail.Invalid, "retire: the release adds %d object(s) (%s): one intent per transition: retire first, then upgrade", len(added), canon.List(added, 10))
	}
	retired := inventory.Missing(cur.Inventory, t.Inventory)
	if len(retired) == 0 {
		return fail.Errorf(fail.Invalid, "retire: the release keeps every object of %s: nothing to retire (that is an upgrade)", cur.Version)
	}
	namespaces := map[string]bool{}
	groups := map[string]bool{}
	for _, id := range t.Inventory {
		if id.Namespace != "" {
			namespaces[id.Namespace] = true
		}
		groups[id.Key().Group] = true
	}
	for _, id := range retired {
		k := id.Key()
		switch {
		case k.Group == "" && k.Kind == "Namespace" && k.Name == h.Target.Namespace:
			return fail.Errorf(fail.Invalid, "retire: %s is the control namespace, which holds the Head: it is never retired", id)
		case k.Group == "" && k.Kind == "Namespace" && namespaces[k.Name]:
			return fail.Errorf(fail.Invalid, "retire: %s still holds objects the release keeps: retire them with it, or keep the namespace", id)
		case k.Group == crdGroup && k.Kind == "CustomResourceDefinition":
			_, group, _ := strings.Cut(k.Name, ".")
			if groups[group] {
				return fail.Errorf(fail.Invalid, "retire: %s defines kinds of API group %q, and the release keeps objects of that group: retire those first (objects of a CRD's group count as its instances)", id, group)
			}
		}
	}
	return nil
}

// Retired is the retired set of a retire from the inventory cur to the
// target inventory, sorted: cur minus target by group, kind, namespace
// and name, in cur's apiVersions.
func Retired(cur, target []inventory.Identity) []inventory.Identity {
	return inventory.Missing(cur, target)
}

func retiredIDs(rs []receipts.Retired) []inventory.Identity {
	ids := make([]inventory.Identity, len(rs))
	for i, r := range rs {
		ids[i] = r.ID
	}
	return ids
}

// inventoryDiff names the objects (by Key) only the current and only the
// target inventory list.
func inventoryDiff(cur, target []inventory.Identity) string {
	var parts []string
	if dropped := inventory.Missing(cur, target); len(dropped) > 0 {
		parts = append(parts, fmt.Sprintf("the target drops %s", canon.List(dropped, 10)))
	}
	if added := inventory.Missing(target, cur); len(added) > 0 {
		parts = append(parts, fmt.Sprintf("the target adds %s", canon.List(added, 10)))
	}
	return strings.Join(parts, "; ")
}
