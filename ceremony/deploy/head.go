package deploy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/Masterminds/semver/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
	"github.com/qinglong/kubectl-ql3/receipts"
)

// The Head ConfigMap's fixed shape (docs/head.md).
const (
	HeadName             = inventory.HeadName // reserved: no release may contain it
	HeadKey              = "head.json"
	HeadSchema           = "qinglong/deployment-head@v1"
	HeadMaxBytes         = canon.HeadJSONMaxBytes
	LabelManagedBy       = "app.kubernetes.io/managed-by"
	LabelManagedByValue  = "kubectl-ql3"
	LabelHeadSchema      = "qinglong.io/head-schema"
	LabelHeadSchemaValue = "deployment-head-v1"
	AnnotationSelfDigest = "qinglong.io/head-self-digest"

	PhaseApplying  = "applying"
	PhaseCommitted = "committed"

	TransitionInstall  = "install"
	TransitionUpgrade  = "upgrade"
	TransitionRollback = "rollback"
	TransitionRetire   = "retire"
)

// Head is the content of head.json: the one durable record of what is
// deployed on a target namespace and which transition is in flight.
type Head struct {
	Schema                string               `json:"schema"`
	Phase                 string               `json:"phase"`
	Generation            int64                `json:"generation"`
	Transition            HeadTransition       `json:"transition"`
	Current               HeadDeployment       `json:"current"`
	Previous              *receipts.Deployment `json:"previous"`
	Target                receipts.Target      `json:"target"`
	Tool                  receipts.Tool        `json:"tool"`
	Steps                 receipts.Steps       `json:"steps"`
	PreviousReceiptDigest string               `json:"previousReceiptDigest"`
	// Retired, on a retire only, lists the objects it removes: UID,
	// resourceVersion and reviewed digest as the preflight read them,
	// outcome "pending" while
	// applying and the final outcome once committed. Absent (omitted) on
	// every other transition, whose head.json is unchanged by retirement.
	Retired []receipts.Retired `json:"retired,omitempty"`
	// ApprovalPolicy is "two-person" when the two-person rule is on after
	// this transition; Approval is the approval this transition was
	// applied under, when one was required. Both absent otherwise, so a
	// Head without the rule is byte for byte what it was before
	// (docs/head.md, "The two-person rule").
	ApprovalPolicy   string        `json:"approvalPolicy,omitempty"`
	Approval         *HeadApproval `json:"approval,omitempty"`
	DeploymentDigest string        `json:"deploymentDigest"`
	StateDigest      string        `json:"stateDigest"`
	SelfDigest       string        `json:"selfDigest"`
}

// HeadTransition is the exact transition that produced (or is producing)
// this generation, and the mutation id of the process that last took it.
type HeadTransition struct {
	receipts.Transition
	MutationID string `json:"mutationId"`
}

// HeadDeployment is the current deployment with its full inventory, so an
// upgrade can check the subset rule without trusting a workstation file.
type HeadDeployment struct {
	receipts.Deployment
	Inventory []inventory.Identity `json:"inventory"`
}

// ExpectedHead is what an operator pins a preflight to.
type ExpectedHead struct {
	Generation       int64  `json:"generation"`
	DeploymentDigest string `json:"deploymentDigest"`
	LockDigest       string `json:"lockDigest"`
	StateDigest      string `json:"stateDigest"`
}

// Expected is the token for this Head.
func (h *Head) Expected() ExpectedHead {
	if h == nil {
		return ExpectedHead{}
	}
	return ExpectedHead{Generation: h.Generation, DeploymentDigest: h.DeploymentDigest, LockDigest: h.Current.LockDigest, StateDigest: h.StateDigest}
}

const tokenPrefix = "ql3h1"

// AbsentToken is the expected-Head token of a target with no Head.
const AbsentToken = tokenPrefix + "-0-none"

// String is the copy-pasteable token: ql3h1-<generation>-<deployment hex>-<lock hex>-<state hex>.
func (e ExpectedHead) String() string {
	if e.Generation == 0 {
		return AbsentToken
	}
	hex := func(d string) string { return strings.TrimPrefix(d, inventory.DigestPrefix) }
	return fmt.Sprintf("%s-%d-%s-%s-%s", tokenPrefix, e.Generation, hex(e.DeploymentDigest), hex(e.LockDigest), hex(e.StateDigest))
}

var tokenRE = regexp.MustCompile(`^ql3h1-([1-9][0-9]{0,17})-([0-9a-f]{64})-([0-9a-f]{64})-([0-9a-f]{64})$`)

// ParseExpectedHead parses a token printed by `kubectl ql3 head`.
func ParseExpectedHead(s string) (ExpectedHead, error) {
	s = strings.TrimSpace(s)
	if s == AbsentToken {
		return ExpectedHead{}, nil
	}
	m := tokenRE.FindStringSubmatch(s)
	if m == nil {
		return ExpectedHead{}, fail.Errorf(fail.Invalid, "--expected-head %q is not a Head token: want %q or ql3h1-<generation>-<64 hex>-<64 hex>-<64 hex> as printed by `kubectl ql3 head`", s, AbsentToken)
	}
	g, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return ExpectedHead{}, fail.Errorf(fail.Invalid, "--expected-head: generation: %w", err)
	}
	p := inventory.DigestPrefix
	return ExpectedHead{Generation: g, DeploymentDigest: p + m[2], LockDigest: p + m[3], StateDigest: p + m[4]}, nil
}

// Seal computes the deployment, state and self digests.
func (h *Head) Seal() error {
	var err error
	if h.DeploymentDigest, err = receipts.DeploymentDigest(h.Generation, h.Transition.Transition, h.Current.Deployment,
		h.Previous, h.Target, h.Tool, h.PreviousReceiptDigest); err != nil {
		return err
	}
	if h.StateDigest, err = h.digestWithout(inventory.DomainHeadState, "stateDigest", "selfDigest"); err != nil {
		return err
	}
	h.SelfDigest, err = h.digestWithout(inventory.DomainHead, "selfDigest")
	return err
}

// digestWithout is digestWithout(domain, h, drop...), the current
// inventory (nearly all of a large Head) hashed one identity at a time
// into the canonical JSON of the rest (canon.NewArrayDigestIn,
// Identity.AppendCanonical): the same bytes hashed, without canonicalising
// the whole document through a parse tree, which every Head read and
// write does twice.
func (h *Head) digestWithout(domain string, drop ...string) (string, error) {
	if h.Current.Inventory == nil {
		return digestWithout(domain, h, drop...)
	}
	shell := *h
	shell.Current.Inventory = nil
	raw, err := json.Marshal(&shell)
	if err != nil {
		return "", err
	}
	var m, cur map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return "", err
	}
	if err := json.Unmarshal(m["current"], &cur); err != nil {
		return "", err
	}
	for _, k := range drop {
		delete(m, k)
	}
	if cur["inventory"], err = json.Marshal(canon.ArrayPlaceholder); err != nil {
		return "", err
	}
	if m["current"], err = json.Marshal(cur); err != nil {
		return "", err
	}
	a, err := canon.NewArrayDigestIn(domain, m)
	if errors.Is(err, canon.ErrPlaceholderInShell) {
		return digestWithout(domain, h, drop...)
	}
	if err != nil {
		return "", err
	}
	if err := a.AddIdentities(h.Current.Inventory); err != nil {
		return "", err
	}
	return a.Sum(), nil
}

// digestWithout digests the canonical JSON of v with the named top-level
// members removed.
func digestWithout(domain string, v any, drop ...string) (string, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return "", err
	}
	for _, k := range drop {
		delete(m, k)
	}
	return inventory.DigestOf(domain, m)
}

// ConfigMap renders the Head as its ConfigMap in namespace ns, head.json in
// the form Bytes chooses, compressed when it is long (headContainer). A head.json over HeadMaxBytes is refused before
// anything is written (preflight and lock refuse such a release first:
// CheckHeadFits, canon.CheckReleaseBounds).
func (h *Head) ConfigMap(ns string) (*corev1.ConfigMap, error) {
	data, schema, err := h.stored()
	if err != nil {
		return nil, err
	}
	if len(data) > HeadMaxBytes {
		return nil, fail.Errorf(fail.Invalid, "head: head.json of %d objects is %d bytes, over the %d-byte bound (docs/head.md §2.2): split the release", len(h.Current.Inventory), len(data), HeadMaxBytes)
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:        HeadName,
			Namespace:   ns,
			Labels:      headLabels(h, schema),
			Annotations: map[string]string{AnnotationSelfDigest: h.SelfDigest},
		},
		Data: h.flatKeys(),
	}
	headContainer(cm, data)
	return cm, nil
}

func tamper(format string, args ...any) error {
	return fail.Errorf(fail.Tamper, "head: "+format, args...)
}

// ParseHeadConfigMap validates the Head ConfigMap and its head.json and
// fails closed on every tamper class of docs/ceremony.md §4.2: extra keys,
// binaryData other than a compressed head.json (StoredHeadJSON), finalizers, owner references, a deletion timestamp, wrong
// labels or annotations, oversize, non-canonical JSON, unknown fields,
// invalid values and any digest mismatch.
func ParseHeadConfigMap(cm *corev1.ConfigMap) (*Head, error) {
	ref := cm.Namespace + "/" + cm.Name
	switch {
	case cm.Name != HeadName:
		return nil, tamper("%s: name must be %q", ref, HeadName)
	case cm.DeletionTimestamp != nil:
		return nil, tamper("%s is being deleted", ref)
	case len(cm.Finalizers) > 0:
		return nil, tamper("%s has finalizers %q", ref, cm.Finalizers)
	case len(cm.OwnerReferences) > 0:
		return nil, tamper("%s has owner references", ref)
	case cm.Immutable != nil:
		return nil, tamper("%s sets immutable", ref)
	}
	if len(cm.Annotations) != 1 || !inventory.IsDigest(cm.Annotations[AnnotationSelfDigest]) {
		return nil, tamper("%s: annotations must be exactly %s=<digest>, got %v", ref, AnnotationSelfDigest, slices.Sorted(maps.Keys(cm.Annotations)))
	}
	raw, compressed, err := StoredHeadJSON(cm)
	if err != nil {
		return nil, err
	}
	h, schema, err := parseHead(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	if compressed && schema != HeadSchemaV2 { // the container's rule 4 (docs/head.md §2.3)
		return nil, tamper("%s: binaryData key %q holds a head.json of schema %s: only a v2 one is compressed", ref, HeadKeyGzip, schema)
	}
	if err := h.checkFlat(cm, schema, compressed); err != nil {
		return nil, tamper("%s: %v", ref, err)
	}
	if cm.Annotations[AnnotationSelfDigest] != h.SelfDigest {
		return nil, tamper("%s: annotation %s=%s does not match selfDigest %s", ref, AnnotationSelfDigest, cm.Annotations[AnnotationSelfDigest], h.SelfDigest)
	}
	if h.Target.Namespace != cm.Namespace {
		return nil, tamper("%s: target namespace %q is not the Head's namespace", ref, h.Target.Namespace)
	}
	return h, nil
}

// ParseHead strictly parses canonical head.json, in either stored form
// (docs/head.md §2.1), and validates it; the Head it returns is the
// logical one (schema HeadSchema, the inventory listed).
func ParseHead(data []byte) (*Head, error) {
	h, _, err := parseHead(data)
	return h, err
}

// parseHead is ParseHead, also saying which form head.json was stored in.
func parseHead(data []byte) (*Head, string, error) {
	if len(data) > HeadMaxBytes {
		return nil, "", tamper("head.json is %d bytes, over the %d-byte bound", len(data), HeadMaxBytes)
	}
	h, schema, err := decodeHead(data)
	if err != nil {
		return nil, "", err
	}
	again, err := h.encode(schema)
	if err != nil {
		return nil, "", tamper("head.json: %v", err)
	}
	if !bytes.Equal(again, data) {
		return nil, "", tamper("head.json is not canonical JSON (RFC 8785) or has missing, null or duplicate fields")
	}
	if err := h.validate(); err != nil {
		return nil, "", err
	}
	if err := h.checkApprovalMembers(); err != nil {
		return nil, "", err
	}
	want := *h
	if err := want.Seal(); err != nil {
		return nil, "", tamper("%v", err)
	}
	for _, d := range []struct{ name, got, want string }{
		{"deploymentDigest", h.DeploymentDigest, want.DeploymentDigest},
		{"stateDigest", h.StateDigest, want.StateDigest},
		{"selfDigest", h.SelfDigest, want.SelfDigest},
	} {
		if d.got != d.want {
			return nil, "", tamper("head.json: %s %s does not match its content (recomputed %s)", d.name, d.got, d.want)
		}
	}
	return h, schema, nil
}

var mutationIDRE = regexp.MustCompile(`^[0-9a-f]{32}$`)

// validate checks every field's form and the phase invariants.
func (h *Head) validate() error {
	bad := func(field, format string, args ...any) error {
		return tamper("head.json: %s: "+format, append([]any{field}, args...)...)
	}
	if h.Schema != HeadSchema {
		return bad("schema", "%q, want %q or %q", h.Schema, HeadSchema, HeadSchemaV2)
	}
	if h.Phase != PhaseApplying && h.Phase != PhaseCommitted {
		return bad("phase", "%q, want %q or %q", h.Phase, PhaseApplying, PhaseCommitted)
	}
	if h.Generation < 1 {
		return bad("generation", "%d, want >= 1", h.Generation)
	}
	t := h.Transition
	switch t.Kind {
	case TransitionInstall:
		if h.Generation != 1 || h.Previous != nil || h.PreviousReceiptDigest != "" {
			return bad("transition.kind", "install must be generation 1 with no previous deployment")
		}
	case TransitionUpgrade, TransitionRollback, TransitionRetire:
		if h.Generation < 2 || h.Previous == nil || !inventory.IsDigest(h.PreviousReceiptDigest) {
			return bad("transition.kind", "%s needs generation >= 2, a previous deployment and previousReceiptDigest", t.Kind)
		}
	default:
		return bad("transition.kind", "%q", t.Kind)
	}
	if err := receipts.CheckSupersedes(h.Generation, t.Transition); err != nil {
		return tamper("head.json: %v", err)
	}
	if t.Supersedes != nil && t.Kind == TransitionRollback && (h.Previous == nil || h.Current.Deployment != *h.Previous) {
		return bad("current", "a rollback that supersedes returns to the last committed deployment, previous")
	}
	if !inventory.IsDigest(t.CommandDigest) || !inventory.IsDigest(t.PreflightDigest) {
		return bad("transition", "commandDigest and preflightDigest must be sha256 digests")
	}
	if err := checkRetiredList(t.Kind, h.Phase == PhaseApplying, h.Retired); err != nil {
		return tamper("head.json: %v", err)
	}
	if !mutationIDRE.MatchString(t.MutationID) {
		return bad("transition.mutationId", "%q is not 32 lowercase hex digits", t.MutationID)
	}
	if err := validateDeployment("current", h.Current.Deployment); err != nil {
		return err
	}
	if h.Previous != nil {
		if err := validateDeployment("previous", *h.Previous); err != nil {
			return err
		}
	}
	if err := inventory.CheckSortedUnique(h.Current.Inventory); err != nil {
		return bad("current.inventory", "%v", err)
	}
	if len(h.Current.Inventory) != h.Current.InventoryCount {
		return bad("current.inventoryCount", "%d, but the inventory lists %d", h.Current.InventoryCount, len(h.Current.Inventory))
	}
	if d, err := inventory.InventoryDigest(h.Current.Inventory); err != nil || d != h.Current.InventoryDigest {
		return bad("current.inventoryDigest", "%s does not match the listed inventory", h.Current.InventoryDigest)
	}
	if !inventory.IsDigest(h.Target.ClusterIdentity) || h.Target.Namespace == "" {
		return bad("target", "clusterIdentity must be a digest and namespace non-empty")
	}
	if h.Tool.Name == "" || h.Tool.FieldManager == "" || h.Tool.Version == "" {
		return bad("tool", "name, version and fieldManager are required")
	}
	s := h.Steps
	if !inventory.IsDigest(s.Identity) || !inventory.IsDigest(s.DryRun) {
		return bad("steps", "identity and dryRun must be digests in every phase")
	}
	late := []string{s.Apply, s.Converge, s.FinalIdentity}
	for _, d := range late {
		if h.Phase == PhaseCommitted && !inventory.IsDigest(d) {
			return bad("steps", "a committed Head needs apply, converge and finalIdentity digests")
		}
		if h.Phase == PhaseApplying && d != "" {
			return bad("steps", "an applying Head has no apply, converge or finalIdentity digest yet")
		}
	}
	return nil
}

func validateDeployment(field string, d receipts.Deployment) error {
	if _, err := semver.StrictNewVersion(d.Version); err != nil {
		return tamper("head.json: %s.version %q: %v", field, d.Version, err)
	}
	if !inventory.IsDigest(d.LockDigest) || !inventory.IsDigest(d.InventoryDigest) {
		return tamper("head.json: %s: lockDigest and inventoryDigest must be sha256 digests", field)
	}
	if d.InventoryCount < 0 {
		return tamper("head.json: %s.inventoryCount %d is negative", field, d.InventoryCount)
	}
	return nil
}
