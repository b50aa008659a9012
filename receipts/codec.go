package receipts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

// Transition kinds.
const (
	KindInstall  = "install"
	KindUpgrade  = "upgrade"
	KindRollback = "rollback"
	KindRetire   = "retire"
)

// MaxFileSize bounds a receipt or signature file; larger files are rejected
// unread.
const MaxFileSize = 16 << 20

// maxSafeInteger is the largest integer a JSON number carries exactly
// (RFC 8785 numbers are IEEE 754 doubles).
const maxSafeInteger = 1<<53 - 1

var namespaceRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// Seal validates r and sets its SelfDigest. It refuses whatever Parse would
// refuse: a sealed receipt's Bytes always parse back to an equal receipt.
// Errors are fail.Tamper, as Parse's; on error r is left unchanged.
func (r *Receipt) Seal() error {
	if r == nil {
		return fail.Errorf(fail.Tamper, "receipt is nil")
	}
	if err := r.validate(encoded{}); err != nil {
		return err
	}
	d, err := r.selfDigest()
	if err != nil {
		return err
	}
	old := r.SelfDigest
	r.SelfDigest = d
	if _, err := r.Bytes(); err != nil {
		r.SelfDigest = old
		return err
	}
	return nil
}

// Bytes is the receipt file's exact content: the RFC 8785 canonical JSON of
// r, with no trailing newline. r must be sealed and valid.
func (r *Receipt) Bytes() ([]byte, error) {
	if r == nil {
		return nil, fail.Errorf(fail.Tamper, "receipt is nil")
	}
	if r.SelfDigest == "" {
		return nil, fail.Errorf(fail.Tamper, "receipt is not sealed")
	}
	data, err := r.canonical()
	if err != nil {
		return nil, err
	}
	whole, err := canon.Canonical(r)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(data, whole) {
		return nil, fmt.Errorf("receipt encoding disagrees with RFC 8785 canonicalisation of the whole receipt")
	}
	back, err := Parse(data)
	if err != nil {
		return nil, err
	}
	if !reflect.DeepEqual(back, r) {
		// Only strings the JSON encoder rewrites (invalid UTF-8) get here.
		return nil, fail.Errorf(fail.Tamper, "receipt does not survive a round trip through its canonical bytes")
	}
	return data, nil
}

// Parse reads a receipt file strictly: the bytes must be exactly the
// canonical JSON of a valid, sealed receipt. Every failure is fail.Tamper.
func Parse(data []byte) (*Receipt, error) {
	if len(data) == 0 {
		return nil, fail.Errorf(fail.Tamper, "receipt is empty")
	}
	if len(data) > MaxFileSize {
		return nil, fail.Errorf(fail.Tamper, "receipt is larger than %d bytes", MaxFileSize)
	}
	var r Receipt
	if err := decodeStrict(data, &r, "receipt"); err != nil {
		// A file of another schema is named as such rather than as a
		// pile of unknown fields.
		if serr := checkSchema(data, "receipt", Schema); serr != nil {
			return nil, serr
		}
		return nil, err
	}
	enc, err := r.encode()
	if err != nil {
		return nil, fail.Errorf(fail.Tamper, "receipt: %w", err)
	}
	if !bytes.Equal(enc.full, data) {
		if err := checkSchema(data, "receipt", Schema); err != nil {
			return nil, err
		}
		return nil, explainNonCanonical("receipt", data, enc.full)
	}
	if err := r.validate(enc); err != nil {
		return nil, err
	}
	return &r, nil
}

// FileName is the receipt's file name: the zero-padded generation (six
// digits or more), the transition kind and the version, for example
// "000001-install-3.0.0.receipt.json". Names of generations up to 999999
// sort by generation. r must be valid.
func FileName(r *Receipt) string {
	return fmt.Sprintf("%06d-%s-%s%s", r.Generation, r.Transition.Kind, r.Deployment.Version, FileSuffix)
}

// FileSuffix ends every receipt file name.
const FileSuffix = ".receipt.json"

// encoded is a receipt's canonical JSON and the parts of it that are
// digested.
type encoded struct {
	full      []byte // the file's bytes
	unsealed  []byte // the selfDigest pre-image: full without the selfDigest member
	inventory []byte // the inventory array, as the inventory digest hashes it
}

// encode canonicalises r. RFC 8785 writes an object as its members sorted by
// name, each "name":value with the value canonical; so each top-level member
// is canonicalised once and the object assembled twice, with and without
// selfDigest. Member names are the json tags (plain ASCII, no escaping).
// Bytes cross-checks the result against canon.Canonical of the whole.
func (r *Receipt) encode() (encoded, error) {
	type member struct {
		name  string
		value []byte
	}
	rv := reflect.ValueOf(r).Elem()
	rt := rv.Type()
	members := make([]member, 0, rt.NumField())
	var enc encoded
	for i := range rt.NumField() {
		name, opts, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		if opts == "omitempty" && rv.Field(i).IsZero() {
			continue // absent, as encoding/json omits it
		}
		c, err := canon.Canonical(rv.Field(i).Interface())
		if err != nil {
			return enc, fmt.Errorf("field %q: %w", name, err)
		}
		if name == "inventory" {
			enc.inventory = c
		}
		members = append(members, member{name, c})
	}
	slices.SortFunc(members, func(a, b member) int { return strings.Compare(a.name, b.name) })
	assemble := func(skip string) []byte {
		var b []byte
		for _, m := range members {
			if m.name == skip {
				continue
			}
			if b == nil {
				b = append(b, '{')
			} else {
				b = append(b, ',')
			}
			b = append(b, '"')
			b = append(b, m.name...)
			b = append(b, '"', ':')
			b = append(b, m.value...)
		}
		return append(b, '}')
	}
	enc.full, enc.unsealed = assemble(""), assemble("selfDigest")
	return enc, nil
}

// canonical is the RFC 8785 canonical JSON of r as it stands.
func (r *Receipt) canonical() ([]byte, error) {
	enc, err := r.encode()
	return enc.full, err
}

// selfDigest is the "receipt"-domain digest of the canonical JSON of r with
// the selfDigest member removed.
func (r *Receipt) selfDigest() (string, error) {
	enc, err := r.encode()
	if err != nil {
		return "", err
	}
	return canon.DigestBytes(canon.DomainReceipt, enc.unsealed), nil
}

// SelfDigestOf recomputes the receipt digest of r (ignoring r.SelfDigest).
func SelfDigestOf(r *Receipt) (string, error) { return r.selfDigest() }

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
	}
	return nil
}

// checkSchema reads just the "schema" member, so a file of another schema
// is named as such rather than as a pile of unknown fields.
func checkSchema(data []byte, what, want string) error {
	var head struct {
		Schema *string `json:"schema"`
	}
	if err := json.NewDecoder(bytes.NewReader(data)).Decode(&head); err != nil {
		return fail.Errorf(fail.Tamper, "%s is not a JSON object: %v", what, err)
	}
	switch {
	case head.Schema == nil:
		return fail.Errorf(fail.Tamper, "%s field %q: is missing", what, "schema")
	case *head.Schema != want:
		return fail.Errorf(fail.Tamper, "%s field %q: %q is not %q", what, "schema", *head.Schema, want)
	}
	return nil
}

// decodeStrict decodes one JSON object into v, rejecting unknown fields and
// anything after the object.
func decodeStrict(data []byte, v any, what string) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fail.Errorf(fail.Tamper, "%s: %v", what, err)
	}
	if rest := data[dec.InputOffset():]; len(rest) > 0 {
		if bytes.Equal(rest, []byte("\n")) {
			return fail.Errorf(fail.Tamper, "%s ends with a newline; the file must end at the closing brace", what)
		}
		return fail.Errorf(fail.Tamper, "%s has %d bytes after the JSON object", what, len(rest))
	}
	return nil
}

// explainNonCanonical names the first structural difference between the
// bytes read and the canonical bytes of what they decoded to: a missing or
// unknown member, a null, or only non-canonical encoding.
func explainNonCanonical(what string, got, want []byte) error {
	var g, w any
	if decodeNumbers(got, &g) == nil && decodeNumbers(want, &w) == nil {
		if msg := shapeDiff("", w, g); msg != "" {
			return fail.Errorf(fail.Tamper, "%s %s", what, msg)
		}
	}
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	return fail.Errorf(fail.Tamper, "%s is not canonical JSON (RFC 8785): it differs from its canonical form at byte %d", what, i)
}

func decodeNumbers(data []byte, v *any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return dec.Decode(v)
}

func shapeDiff(path string, want, got any) string {
	name := func(k string) string {
		if path == "" {
			return k
		}
		return path + "." + k
	}
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Sprintf("field %q: is not an object", path)
		}
		var keys []string
		for k := range g {
			if _, ok := w[k]; !ok {
				keys = append(keys, k)
			}
		}
		if len(keys) > 0 {
			slices.Sort(keys)
			return fmt.Sprintf("field %q: is unknown", name(keys[0]))
		}
		for k := range w {
			if _, ok := g[k]; !ok {
				keys = append(keys, k)
			}
		}
		if len(keys) > 0 {
			slices.Sort(keys)
			return fmt.Sprintf("field %q: is missing", name(keys[0]))
		}
		keys = keys[:0]
		for k := range w {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if msg := shapeDiff(name(k), w[k], g[k]); msg != "" {
				return msg
			}
		}
	case []any:
		g, ok := got.([]any)
		if !ok {
			if got == nil {
				return fmt.Sprintf("field %q: is null", path)
			}
			return fmt.Sprintf("field %q: is not an array", path)
		}
		for i := range min(len(w), len(g)) {
			if msg := shapeDiff(fmt.Sprintf("%s[%d]", path, i), w[i], g[i]); msg != "" {
				return msg
			}
		}
	case json.Number:
		if g, ok := got.(json.Number); !ok || g != w {
			return fmt.Sprintf("field %q: %s is not the canonical number %s", path, jsonText(got), w)
		}
	default:
		if got == nil && want != nil {
			return fmt.Sprintf("field %q: is null", path)
		}
	}
	return ""
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
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
