package testcluster

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// AuditEvent is the part of a kube-apiserver audit event (audit.k8s.io/v1,
// Metadata level) that tests read: who wrote what, and the answer.
type AuditEvent struct {
	Stage     string `json:"stage"`
	Verb      string `json:"verb"`
	UserAgent string `json:"userAgent"`
	User      struct {
		Username string   `json:"username"`
		Groups   []string `json:"groups"`
	} `json:"user"`
	ObjectRef struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		Subresource string `json:"subresource"`
		APIGroup    string `json:"apiGroup"`
		APIVersion  string `json:"apiVersion"`
	} `json:"objectRef"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestURI string `json:"requestURI"`
	// StageTimestamp is when the API server reached Stage (microseconds,
	// the machine's clock).
	StageTimestamp time.Time `json:"stageTimestamp"`
	// RequestObject is the request body, recorded for deletes only (their
	// DeleteOptions: preconditions, dryRun).
	RequestObject json.RawMessage `json:"requestObject,omitempty"`
}

// DryRun reports whether the request was a dry run: dryRun=All in the URI,
// or, for a delete, in its DeleteOptions body.
func (e AuditEvent) DryRun() bool {
	if bytes.Contains([]byte(e.RequestURI), []byte("dryRun=All")) {
		return true
	}
	var body struct {
		DryRun []string `json:"dryRun"`
	}
	return len(e.RequestObject) > 0 && json.Unmarshal(e.RequestObject, &body) == nil && slices.Contains(body.DryRun, "All")
}

// Review reports whether the request was an access or token review
// (SelfSubjectAccessReview and the like): a question to the API server that
// persists nothing, so not a write although its verb is create.
func (e AuditEvent) Review() bool {
	return strings.HasSuffix(e.ObjectRef.Resource, "reviews") &&
		(e.ObjectRef.APIGroup == "authorization.k8s.io" || e.ObjectRef.APIGroup == "authentication.k8s.io")
}

// ParseAuditLog reads a JSON-lines audit log.
func ParseAuditLog(data []byte) ([]AuditEvent, error) {
	var out []AuditEvent
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for n := 1; sc.Scan(); n++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var e AuditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("audit log line %d: %w", n, err)
		}
		out = append(out, e)
	}
	return out, sc.Err()
}

// Events returns the audit events that match keep, in the order the API
// server logged them (every stage; see Writes and Reads for the usual
// selections).
func (cp *ControlPlane) Events(keep func(AuditEvent) bool) ([]AuditEvent, error) {
	if cp.AuditLogPath == "" {
		return nil, fmt.Errorf("control plane was started without an audit log")
	}
	data, err := os.ReadFile(cp.AuditLogPath)
	if err != nil {
		return nil, err
	}
	events, err := ParseAuditLog(data)
	if err != nil {
		return nil, err
	}
	var out []AuditEvent
	for _, e := range events {
		if keep(e) {
			out = append(out, e)
		}
	}
	return out, nil
}

// Writes returns the completed writes that match keep; dry runs and
// reviews (see Review) are not writes.
func (cp *ControlPlane) Writes(keep func(AuditEvent) bool) ([]AuditEvent, error) {
	return cp.Events(func(e AuditEvent) bool {
		return e.Stage == "ResponseComplete" && !e.Read() && !e.DryRun() && !e.Review() && keep(e)
	})
}

// Read reports whether the event is a read (get, list, watch), not a write.
func (e AuditEvent) Read() bool { return e.Verb == "get" || e.Verb == "list" || e.Verb == "watch" }

// Reads returns the reads (get, list, watch) that match keep, as the API
// server recorded them (a watch is recorded when its response starts).
func (cp *ControlPlane) Reads(keep func(AuditEvent) bool) ([]AuditEvent, error) {
	return cp.Events(func(e AuditEvent) bool {
		final := e.Stage == "ResponseComplete" || (e.Verb == "watch" && e.Stage == "ResponseStarted")
		return e.Read() && final && keep(e)
	})
}
