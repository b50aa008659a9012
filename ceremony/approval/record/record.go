// Package record is the deployment approval's format (docs/approval.md):
// the ConfigMap's name, labels and flat data keys, and the strict reading
// of them. It knows nothing of a cluster: ceremony/approval reads and
// writes the object, and prints the admission policy whose rules mirror
// the ones here.
package record

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// The object's identity and schema.
const (
	// Name is the approval ConfigMap's name, one per control namespace,
	// next to the Head (qinglong3-deployment-head).
	Name = "qinglong3-deployment-approval"
	// Schema is the value of the schema key.
	Schema = "qinglong/deployment-approval@v1"
	// LabelManagedBy and ManagedBy, LabelSchema and SchemaLabel are the
	// object's two labels, exactly.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "kubectl-ql3"
	LabelSchema    = "qinglong.io/approval-schema"
	SchemaLabel    = "deployment-approval-v1"
	// MaxReason bounds the reason, in bytes.
	MaxReason = 1024
	// ServiceAccountPrefix starts every ServiceAccount's username: such an
	// identity never approves (a token anyone with the right to mint it
	// can hold is not a second person).
	ServiceAccountPrefix = "system:serviceaccount:"
)

// The decisions.
const (
	Pending  = "pending"
	Approved = "approved"
	Rejected = "rejected"
)

// The data keys, in the order docs/approval.md lists them.
const (
	KeySchema          = "schema"
	KeyPreflightDigest = "preflightDigest"
	KeyCommandDigest   = "commandDigest"
	KeyExpectedHead    = "expectedHead"
	KeyProposer        = "proposer"
	KeyDecision        = "decision"
	KeyApprover        = "approver"
	KeyReason          = "reason"
)

// Keys is the exact key set of data.
var Keys = []string{KeySchema, KeyPreflightDigest, KeyCommandDigest, KeyExpectedHead, KeyProposer, KeyDecision, KeyApprover, KeyReason}

// Labels is the object's exact label set.
func Labels() map[string]string {
	return map[string]string{LabelManagedBy: ManagedBy, LabelSchema: SchemaLabel}
}

// Approval is the content of the object's data.
type Approval struct {
	PreflightDigest string `json:"preflightDigest"`
	CommandDigest   string `json:"commandDigest"`
	ExpectedHead    string `json:"expectedHead"`
	Proposer        string `json:"proposer"`
	Decision        string `json:"decision"`
	Approver        string `json:"approver"`
	Reason          string `json:"reason"`
}

// Data is the object's data for a.
func (a Approval) Data() map[string]string {
	return map[string]string{
		KeySchema: Schema, KeyPreflightDigest: a.PreflightDigest, KeyCommandDigest: a.CommandDigest,
		KeyExpectedHead: a.ExpectedHead, KeyProposer: a.Proposer, KeyDecision: a.Decision,
		KeyApprover: a.Approver, KeyReason: a.Reason,
	}
}

// Decided is a with decision d by approver, for reason.
func (a Approval) Decided(d, approver, reason string) Approval {
	a.Decision, a.Approver, a.Reason = d, approver, reason
	return a
}

var (
	digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	tokenRE  = regexp.MustCompile(`^ql3h1-(0-none|[1-9][0-9]{0,17}(-[0-9a-f]{64}){3})$`)
)

// Object is what Parse reads of the ConfigMap: everything the format
// constrains.
type Object struct {
	Name            string
	Labels          map[string]string
	Data            map[string]string
	BinaryDataKeys  int
	Immutable       bool
	Deleting        bool
	OwnerReferences int
	Finalizers      int
}

// Parse reads an approval object strictly: the name, exactly the two
// labels, exactly the eight keys, each value of its form, and the
// decision's rules (pending: no approver, no reason; decided: an approver
// other than the proposer, not a ServiceAccount). Anything else is tamper
// (exit 5): nobody but the policy-checked ceremony writes this object.
func Parse(o Object) (Approval, error) {
	bad := func(format string, args ...any) error {
		return fail.Errorf(fail.Tamper, "approval %s: "+format+": the object was not written by the approval ceremony; delete it (kubectl delete configmap %s) and propose again", append(append([]any{Name}, args...), Name)...)
	}
	switch {
	case o.Name != Name:
		return Approval{}, bad("name %q", o.Name)
	case !sameMap(o.Labels, Labels()):
		return Approval{}, bad("labels %v, want exactly %v", o.Labels, Labels())
	case o.BinaryDataKeys != 0 || o.Immutable || o.Deleting || o.OwnerReferences != 0 || o.Finalizers != 0:
		return Approval{}, bad("binaryData, immutable, deletionTimestamp, ownerReferences and finalizers must be absent")
	}
	if err := checkKeys(o.Data); err != nil {
		return Approval{}, bad("%v", err)
	}
	d := o.Data
	a := Approval{PreflightDigest: d[KeyPreflightDigest], CommandDigest: d[KeyCommandDigest], ExpectedHead: d[KeyExpectedHead],
		Proposer: d[KeyProposer], Decision: d[KeyDecision], Approver: d[KeyApprover], Reason: d[KeyReason]}
	if d[KeySchema] != Schema {
		return Approval{}, bad("schema %q, want %q", d[KeySchema], Schema)
	}
	if err := a.Check(); err != nil {
		return Approval{}, bad("%v", err)
	}
	return a, nil
}

func checkKeys(data map[string]string) error {
	var extra, missing []string
	for k := range data {
		if !slices.Contains(Keys, k) {
			extra = append(extra, k)
		}
	}
	for _, k := range Keys {
		if _, ok := data[k]; !ok {
			missing = append(missing, k)
		}
	}
	slices.Sort(extra)
	if len(extra)+len(missing) > 0 {
		return fmt.Errorf("data keys: missing %q, unknown %q; want exactly %q", missing, extra, Keys)
	}
	return nil
}

// Check is the rules of the values (Parse's, less the object's shape).
func (a Approval) Check() error {
	switch {
	case !digestRE.MatchString(a.PreflightDigest):
		return fmt.Errorf("%s %q is not a sha256: digest", KeyPreflightDigest, a.PreflightDigest)
	case !digestRE.MatchString(a.CommandDigest):
		return fmt.Errorf("%s %q is not a sha256: digest", KeyCommandDigest, a.CommandDigest)
	case !tokenRE.MatchString(a.ExpectedHead):
		return fmt.Errorf("%s %q is not an expected-Head token", KeyExpectedHead, a.ExpectedHead)
	case a.Proposer == "":
		return fmt.Errorf("%s is empty", KeyProposer)
	}
	if err := CheckReason(a.Reason); err != nil {
		return err
	}
	switch a.Decision {
	case Pending:
		if a.Approver != "" || a.Reason != "" {
			return fmt.Errorf("a pending approval has an approver (%q) or a reason", a.Approver)
		}
	case Approved, Rejected:
		switch {
		case a.Approver == "":
			return fmt.Errorf("decision %q without an approver", a.Decision)
		case a.Approver == a.Proposer:
			return fmt.Errorf("decision %q by its own proposer %q", a.Decision, a.Proposer)
		case strings.HasPrefix(a.Approver, ServiceAccountPrefix):
			return fmt.Errorf("decision %q by the ServiceAccount %q", a.Decision, a.Approver)
		}
	default:
		return fmt.Errorf("%s %q, want %q, %q or %q", KeyDecision, a.Decision, Pending, Approved, Rejected)
	}
	return nil
}

// CheckReason: at most MaxReason bytes of UTF-8 without control
// characters (so one line, printable as it is).
func CheckReason(r string) error {
	switch {
	case len(r) > MaxReason:
		return fmt.Errorf("%s is %d bytes, at most %d", KeyReason, len(r), MaxReason)
	case !utf8.ValidString(r):
		return fmt.Errorf("%s is not UTF-8", KeyReason)
	case strings.IndexFunc(r, unicode.IsControl) >= 0:
		return fmt.Errorf("%s holds a control character (it must be one printable line)", KeyReason)
	}
	return nil
}

func sameMap(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range b {
		if w, ok := a[k]; !ok || w != v {
			return false
		}
	}
	return true
}
