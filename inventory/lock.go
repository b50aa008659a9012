package inventory

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"
	yamlv3 "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

const (
	// LockFile is the lock's name inside a release directory.
	LockFile = "ql3.lock.yaml"
	// LockSchema is the lock's schema field.
	LockSchema = "kubectl-ql3/lock@v1"
	// ToolName is the tool.name every lock carries.
	ToolName = "kubectl-ql3"
	// FieldManager is the fixed server-side apply field manager.
	FieldManager = "kubectl-ql3"
)

// Lock is a parsed ql3.lock.yaml (docs/lock.md). The YAML field order is
// the struct order; the lock digest is over canonical JSON and ignores it.
type Lock struct {
	Schema  string      `json:"schema" yaml:"schema"`
	Release LockRelease `json:"release" yaml:"release"`
	Target  LockTarget  `json:"target" yaml:"target"`
	Tool    LockTool    `json:"tool" yaml:"tool"`
	Images  []string    `json:"images" yaml:"images"`
	Source  LockSource  `json:"source" yaml:"source"`
	Render  LockRender  `json:"render" yaml:"render"`
	// Helm is present only for a release that renders Helm charts.
	Helm *LockHelm `json:"helm,omitempty" yaml:"helm,omitempty"`
}

// LockRelease is the release a lock binds.
type LockRelease struct {
	// Version is strict SemVer 2.0.0, without a leading "v".
	Version string `json:"version" yaml:"version"`
	// Roles is the role surface: exactly ProductionRoles.
	Roles []string `json:"roles" yaml:"roles,flow"`
}

// LockTarget is the cluster and namespace a lock is for.
type LockTarget struct {
	// ClusterIdentity is the digest of the target's kube-system Namespace UID.
	ClusterIdentity string `json:"clusterIdentity" yaml:"clusterIdentity"`
	// Namespace is the release's control namespace, where the Head lives.
	Namespace string `json:"namespace" yaml:"namespace"`
}

// LockTool is the tool authority a lock requires.
type LockTool struct {
	Name string `json:"name" yaml:"name"`
	// Constraint is a SemVer constraint the running plugin must satisfy.
	Constraint   string `json:"constraint" yaml:"constraint"`
	FieldManager string `json:"fieldManager" yaml:"fieldManager"`
}

// LockSource binds the files the kustomization reads.
type LockSource struct {
	Digest string       `json:"digest" yaml:"digest"`
	Files  []SourceFile `json:"files" yaml:"files"`
}

// LockRender binds the rendered objects.
type LockRender struct {
	Digest          string `json:"digest" yaml:"digest"`
	InventoryDigest string `json:"inventoryDigest" yaml:"inventoryDigest"`
	Count           int    `json:"count" yaml:"count"`
	// SecretValuesCovered is false when the render holds Secret values that
	// no digest binds (allowed Secret data without a key).
	SecretValuesCovered bool       `json:"secretValuesCovered" yaml:"secretValuesCovered"`
	Inventory           []Identity `json:"inventory" yaml:"inventory"`
}

// FieldError is one problem with one field of a lock, or one field in which
// a lock and its release differ.
type FieldError struct {
	// Field is the path in the lock, such as "render.count" or "images[2]".
	Field  string
	Detail string
}

func (e FieldError) String() string { return e.Field + ": " + e.Detail }

// LockError lists every problem found in a lock, or every difference
// between a lock and its release, field by field.
type LockError struct {
	Summary string
	Fields  []FieldError
}

func (e *LockError) Error() string {
	if len(e.Fields) == 1 {
		return e.Summary + ": " + e.Fields[0].String()
	}
	var b strings.Builder
	b.WriteString(e.Summary)
	b.WriteString(":")
	for _, f := range e.Fields {
		b.WriteString("\n  ")
		b.WriteString(f.String())
	}
	return b.String()
}

func lockError(summary string, fields []FieldError) error {
	return fail.Wrap(fail.Invalid, &LockError{Summary: summary, Fields: fields})
}

// ParseLock parses a lock strictly: YAML syntax, duplicate keys, unknown
// fields, wrong types and every field's value are checked, and the error
// names each offending field. The error is fail.Invalid.
func ParseLock(data []byte) (*Lock, error) {
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fail.Errorf(fail.Invalid, "invalid lock: not valid YAML: %w", err)
	}
	switch n, err := yamlDocuments(data); {
	case err != nil:
		return nil, fail.Errorf(fail.Invalid, "invalid lock: not valid YAML: document %d: %w", n, err)
	case n > 1:
		return nil, fail.Errorf(fail.Invalid, "invalid lock: want one YAML document, got %d", n)
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	var raw any
	if err := dec.Decode(&raw); err != nil {
		return nil, fail.Errorf(fail.Invalid, "invalid lock: %w", err)
	}
	if raw == nil {
		return nil, fail.Errorf(fail.Invalid, "invalid lock: the document is empty")
	}
	var errs []FieldError
	checkShape(raw, reflect.TypeFor[Lock](), "", &errs)
	if len(errs) > 0 {
		return nil, lockError("invalid lock", errs)
	}
	var l Lock
	dec = json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		return nil, fail.Errorf(fail.Invalid, "invalid lock: %w", err)
	}
	if errs := l.validate(); len(errs) > 0 {
		return nil, lockError("invalid lock", errs)
	}
	return &l, nil
}

// yamlDocuments counts the YAML documents in data, so that nothing hides
// after a "---" that the JSON conversion would ignore.
func yamlDocuments(data []byte) (int, error) {
	dec := yamlv3.NewDecoder(bytes.NewReader(data))
	n := 0
	for {
		var doc yamlv3.Node
		switch err := dec.Decode(&doc); {
		case errors.Is(err, io.EOF):
			return n, nil
		case err != nil:
			return n + 1, err
		}
		n++
	}
}

// checkShape reports unknown fields and values of the wrong type in v, the
// generic decoding of a lock, against the struct type t. Null counts as
// absent; validate reports absent required fields.
func checkShape(v any, t reflect.Type, path string, errs *[]FieldError) {
	if v == nil {
		return
	}
	bad := func(want string) {
		*errs = append(*errs, FieldError{Field: orRoot(path), Detail: fmt.Sprintf("want %s, got %s", want, jsonKind(v))})
	}
	switch t.Kind() {
	case reflect.Pointer:
		checkShape(v, t.Elem(), path, errs)
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			bad("a mapping")
			return
		}
		fields := map[string]reflect.Type{}
		for i := range t.NumField() {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
			fields[name] = t.Field(i).Type
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			p := k
			if path != "" {
				p = path + "." + k
			}
			ft, ok := fields[k]
			if !ok {
				*errs = append(*errs, FieldError{Field: p, Detail: "unknown field"})
				continue
			}
			checkShape(m[k], ft, p, errs)
		}
	case reflect.Slice:
		list, ok := v.([]any)
		if !ok {
			bad("a list")
			return
		}
		for i, item := range list {
			checkShape(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i), errs)
		}
	case reflect.String:
		if _, ok := v.(string); !ok {
			bad("a string")
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			bad("a boolean")
		}
	case reflect.Int:
		n, ok := v.(json.Number)
		if !ok {
			bad("an integer")
			return
		}
		if i, err := n.Int64(); err != nil || i < 0 || i > 1<<31-1 {
			*errs = append(*errs, FieldError{Field: path, Detail: fmt.Sprintf("%s is not an integer in [0, 2147483647]", n)})
		}
	}
}

func orRoot(path string) string {
	if path == "" {
		return "(document)"
	}
	return path
}

func jsonKind(v any) string {
	switch v.(type) {
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	}
	return fmt.Sprintf("%T", v)
}

var dns1123Label = validation.IsDNS1123Label

// validate checks every field's value and the lock's internal consistency.
func (l *Lock) validate() []FieldError {
	var c checks
	l.validateHeader(&c)
	l.validateTool(&c)
	l.validateImages(&c)
	l.validateSource(&c)
	l.validateRender(&c)
	l.validateHelm(&c)
	return c.errs
}

// checks collects a lock's field errors in the order the fields are read.
type checks struct{ errs []FieldError }

func (c *checks) add(field, format string, args ...any) {
	c.errs = append(c.errs, FieldError{Field: field, Detail: fmt.Sprintf(format, args...)})
}

func (c *checks) digest(field, v string) {
	if !IsDigest(v) {
		c.add(field, "%q is not a digest (sha256: and 64 lowercase hex digits)", v)
	}
}

func (c *checks) required(field, v string) bool {
	if v == "" {
		c.add(field, "required")
	}
	return v != ""
}

// validateHeader: the schema, the release and the target.
func (l *Lock) validateHeader(c *checks) {
	if l.Schema != LockSchema {
		c.add("schema", "%q is not %q", l.Schema, LockSchema)
	}
	if c.required("release.version", l.Release.Version) {
		if _, err := semver.StrictNewVersion(l.Release.Version); err != nil {
			c.add("release.version", "%q is not strict SemVer 2.0.0 (MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD], no leading \"v\")", l.Release.Version)
		}
	}
	if !slices.Equal(l.Release.Roles, ProductionRoles()) {
		c.add("release.roles", "%q is not the production role surface %q", l.Release.Roles, ProductionRoles())
	}
	if c.required("target.clusterIdentity", l.Target.ClusterIdentity) {
		c.digest("target.clusterIdentity", l.Target.ClusterIdentity)
	}
	if c.required("target.namespace", l.Target.Namespace) {
		if msgs := dns1123Label(l.Target.Namespace); len(msgs) > 0 {
			c.add("target.namespace", "%q is not a namespace name: %s", l.Target.Namespace, strings.Join(msgs, "; "))
		}
	}
}

func (l *Lock) validateTool(c *checks) {
	if l.Tool.Name != ToolName {
		c.add("tool.name", "%q is not %q", l.Tool.Name, ToolName)
	}
	if c.required("tool.constraint", l.Tool.Constraint) {
		if _, err := semver.NewConstraint(l.Tool.Constraint); err != nil {
			c.add("tool.constraint", "%q is not a SemVer constraint: %v", l.Tool.Constraint, err)
		}
	}
	switch l.Tool.FieldManager {
	case FieldManager:
	case HeadFieldManager:
		c.add("tool.fieldManager", "%q is reserved for the Head's own writes; a release is applied as %q", l.Tool.FieldManager, FieldManager)
	default:
		c.add("tool.fieldManager", "%q is not %q", l.Tool.FieldManager, FieldManager)
	}
}

func (l *Lock) validateImages(c *checks) {
	if l.Images == nil {
		c.add("images", "required")
	}
	for i, img := range l.Images {
		field := fmt.Sprintf("images[%d]", i)
		switch {
		case !IsPinnedImage(img):
			c.add(field, "%q is not pinned by digest (name[:tag]@sha256:<64 lowercase hex>)", img)
		case i > 0 && img <= l.Images[i-1]:
			c.add(field, "%q is out of order or repeated after %q", img, l.Images[i-1])
		}
	}
}

// validateSource checks source.files and, when nothing so far is wrong,
// that source.digest is their digest. It records whether the files are
// keyed or redacted for validateRender's secretValuesCovered rule.
func (l *Lock) validateSource(c *checks) {
	if c.required("source.digest", l.Source.Digest) {
		c.digest("source.digest", l.Source.Digest)
	}
	if len(l.Source.Files) == 0 {
		c.add("source.files", "required")
	}
	for i, f := range l.Source.Files {
		field := fmt.Sprintf("source.files[%d]", i)
		switch {
		case !cleanRelPath(f.Path) || f.Path == LockFile:
			c.add(field+".path", "%q is not a clean relative slash-separated path of a source file", f.Path)
		case i > 0 && f.Path <= l.Source.Files[i-1].Path:
			c.add(field+".path", "%q is out of order or repeated after %q", f.Path, l.Source.Files[i-1].Path)
		}
		if f.Digest != RedactedMarker && !isKeyedDigest(f.Digest) && !IsDigest(f.Digest) {
			c.add(field+".digest", "%q is neither sha256:<hex>, hmac-sha256:<hex> nor %q", f.Digest, RedactedMarker)
		}
	}
	if len(c.errs) == 0 {
		if d, err := SourceDigest(l.Source.Files); err != nil || d != l.Source.Digest {
			c.add("source.digest", "%q is not the digest of source.files (%s)", l.Source.Digest, d)
		}
	}
}

func isKeyedDigest(d string) bool {
	return strings.HasPrefix(d, HMACPrefix) && IsDigest(DigestPrefix+strings.TrimPrefix(d, HMACPrefix))
}

func (l *Lock) validateRender(c *checks) {
	if c.required("render.digest", l.Render.Digest) {
		c.digest("render.digest", l.Render.Digest)
	}
	if c.required("render.inventoryDigest", l.Render.InventoryDigest) {
		c.digest("render.inventoryDigest", l.Render.InventoryDigest)
	}
	if l.Render.Count != len(l.Render.Inventory) || l.Render.Count == 0 {
		c.add("render.count", "%d is not the number of render.inventory entries (%d), or zero", l.Render.Count, len(l.Render.Inventory))
	}
	invOK := true
	for i, id := range l.Render.Inventory {
		if id.APIVersion == "" || id.Kind == "" || id.Name == "" {
			c.add(fmt.Sprintf("render.inventory[%d]", i), "apiVersion, kind and name are required")
			invOK = false
		}
		if IsHead(id) {
			c.add(fmt.Sprintf("render.inventory[%d]", i), "%q is the Head: the name %q is reserved in every namespace, and no release may write it; rename the ConfigMap and lock again", id.String(), HeadName)
		}
	}
	if err := CheckSortedUnique(l.Render.Inventory); err != nil {
		c.add("render.inventory", "%v", err)
		invOK = false
	}
	if invOK && IsDigest(l.Render.InventoryDigest) {
		if d, _ := InventoryDigest(l.Render.Inventory); d != l.Render.InventoryDigest {
			c.add("render.inventoryDigest", "%q is not the digest of render.inventory (%s)", l.Render.InventoryDigest, d)
		}
	}
	redacted := slices.ContainsFunc(l.Source.Files, func(f SourceFile) bool { return f.Digest == RedactedMarker })
	keyed := slices.ContainsFunc(l.Source.Files, func(f SourceFile) bool { return isKeyedDigest(f.Digest) })
	switch {
	case redacted && l.Render.SecretValuesCovered:
		c.add("render.secretValuesCovered", "true, but source.files has %q entries", RedactedMarker)
	case keyed && !l.Render.SecretValuesCovered:
		c.add("render.secretValuesCovered", "false, but source.files has keyed entries")
	}
}

// lockComment is the comment that opens every lock kubectl ql3 lock writes.
const lockComment = "Written by kubectl ql3 lock; check with kubectl ql3 lock verify (docs/lock.md)."

// Marshal encodes the lock as the YAML kubectl ql3 lock writes. ParseLock
// of the result equals l. The lock is encoded once, straight to text: the
// bytes every earlier version wrote by encoding it into a yaml.Node and
// then the node (0.6 s and 370 MB allocated at 10,000 objects), but for a
// plain "<<", which the node path tags "!!merge <<"; a lock holding "<<"
// anywhere is written through the node, as before.
func (l *Lock) Marshal() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString("# " + lockComment + "\n")
	if err := encodeYAML(&buf, l.normalized()); err != nil {
		return nil, err
	}
	if !bytes.Contains(buf.Bytes(), []byte("<<")) {
		return buf.Bytes(), nil
	}
	return l.marshalThroughNode()
}

// marshalThroughNode is Marshal by way of a yaml.Node.
func (l *Lock) marshalThroughNode() ([]byte, error) {
	var doc yamlv3.Node
	if err := doc.Encode(l.normalized()); err != nil {
		return nil, err
	}
	doc.HeadComment = lockComment
	var buf bytes.Buffer
	if err := encodeYAML(&buf, &doc); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// encodeYAML writes v to buf as YAML indented by 2.
func encodeYAML(buf *bytes.Buffer, v any) error {
	enc := yamlv3.NewEncoder(buf)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return err
	}
	return enc.Close()
}

// MarshalYAML writes a source file as one flow mapping in the lock.
func (f SourceFile) MarshalYAML() (any, error) {
	return canon.FlowMapping("path", f.Path, "digest", f.Digest)
}

// normalized is a copy of l with absent lists made empty, so that a lock
// encodes the same whether a list is nil or empty.
func (l *Lock) normalized() *Lock {
	c := *l
	if c.Release.Roles == nil {
		c.Release.Roles = []string{}
	}
	if c.Images == nil {
		c.Images = []string{}
	}
	if c.Source.Files == nil {
		c.Source.Files = []SourceFile{}
	}
	if c.Render.Inventory == nil {
		c.Render.Inventory = []Identity{}
	}
	return &c
}

// Digest is the lock digest: the canonical JSON of the lock under the
// "lock" domain.
func (l *Lock) Digest() (string, error) { return DigestOf(DomainLock, l.normalized()) }

// DigestInput is the exact bytes the lock digest hashes: the "lock"
// domain's header, a zero byte and the lock's canonical JSON; its SHA-256
// is the lock digest's hex (an attestation's lock subject, docs/receipts.md §7.2).
func (l *Lock) DigestInput() ([]byte, error) { return canon.DigestInput(DomainLock, l.normalized()) }

// ReadLock reads and parses dir/ql3.lock.yaml.
func ReadLock(fsys filesys.FileSystem, dir string) (*Lock, error) {
	p := filepath.Join(dir, LockFile)
	if !fsys.Exists(p) {
		return nil, fail.Errorf(fail.Invalid, "release %q has no %s; write one with kubectl ql3 lock %s --version VERSION", dir, LockFile, dir)
	}
	data, err := fsys.ReadFile(p)
	if err != nil {
		return nil, fail.Errorf(fail.Invalid, "read lock: %w", err)
	}
	l, err := ParseLock(data)
	if err != nil {
		return nil, fail.Errorf(fail.Invalid, "%s: %w", p, err)
	}
	return l, nil
}
