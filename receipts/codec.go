package receipts

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"

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
		var c []byte
		var err error
		if ids, ok := rv.Field(i).Interface().([]canon.Identity); ok {
			c, err = canon.CanonicalIdentities(ids) // the inventory: most of a large receipt
		} else {
			c, err = canon.Canonical(rv.Field(i).Interface())
		}
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
