package cas

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"syscall"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/qinglong/kubectl-ql3/internal/fail"
)

var cmGR = schema.GroupResource{Resource: "configmaps"}

func status(code int32, reason metav1.StatusReason) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: code, Reason: reason, Message: fmt.Sprintf("server says %d", code)}}
}

// Every branch of the classifier, with the errors client-go really
// returns for each answer.
func TestClassify(t *testing.T) {
	timeout := &url.Error{Op: "Put", URL: "https://127.0.0.1/x", Err: fmt.Errorf("net/http: request canceled (Client.Timeout exceeded while awaiting headers): %w", context.DeadlineExceeded)}
	tests := []struct {
		name    string
		op      Op
		err     error
		class   fail.Class
		unknown bool
	}{
		{"forbidden", OpUpdate, apierrors.NewForbidden(cmGR, "x", errors.New("rbac")), fail.Invalid, false},
		{"unauthorized", OpRead, apierrors.NewUnauthorized("who"), fail.Invalid, false},
		{"bad request (webhook denial)", OpApply, apierrors.NewBadRequest(`admission webhook "deny.example" denied the request`), fail.Invalid, false},
		{"invalid 422 (ValidatingAdmissionPolicy)", OpApply, apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, "x", nil), fail.Invalid, false},
		{"method not allowed", OpApply, apierrors.NewMethodNotSupported(cmGR, "patch"), fail.Invalid, false},
		{"request too large", OpUpdate, apierrors.NewRequestEntityTooLargeError("too big"), fail.Invalid, false},
		{"unsupported media type", OpApply, status(415, metav1.StatusReasonUnsupportedMediaType), fail.Invalid, false},
		{"not acceptable", OpRead, status(406, metav1.StatusReasonNotAcceptable), fail.Invalid, false},
		{"gone", OpRead, apierrors.NewResourceExpired("expired"), fail.Invalid, false},
		{"conflict", OpUpdate, apierrors.NewConflict(cmGR, "x", errors.New("stale")), fail.Conflict, false},
		{"already exists", OpCreate, apierrors.NewAlreadyExists(cmGR, "x"), fail.Conflict, false},
		{"not found on update", OpUpdate, apierrors.NewNotFound(cmGR, "x"), fail.Conflict, false},
		{"not found on delete", OpDelete, apierrors.NewNotFound(cmGR, "x"), fail.Conflict, false},
		{"not found on create (namespace)", OpCreate, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "ns"), fail.Invalid, false},
		{"not found on apply", OpApply, apierrors.NewNotFound(cmGR, "x"), fail.Invalid, false},
		{"not found on read", OpRead, apierrors.NewNotFound(cmGR, "x"), fail.Invalid, false},
		{"no kind match (local)", OpApply, &meta.NoKindMatchError{GroupKind: schema.GroupKind{Kind: "Widget"}}, fail.Invalid, false},
		{"request timeout 408", OpUpdate, status(408, metav1.StatusReasonTimeout), fail.Unavailable, true},
		{"too many requests 429", OpApply, apierrors.NewTooManyRequests("slow down", 1), fail.Unavailable, true},
		{"internal error 500", OpUpdate, apierrors.NewInternalError(errors.New("etcd")), fail.Unavailable, true},
		{"server timeout 504", OpUpdate, apierrors.NewTimeoutError("etcd slow", 0), fail.Unavailable, true},
		{"service unavailable 503", OpRead, apierrors.NewServiceUnavailable("restarting"), fail.Unavailable, true},
		{"client timeout (--request-timeout)", OpUpdate, timeout, fail.Unavailable, true},
		{"connection reset", OpCreate, &url.Error{Op: "Post", URL: "u", Err: syscall.ECONNRESET}, fail.Unavailable, true},
		{"connection refused", OpRead, fmt.Errorf("dial: %w", syscall.ECONNREFUSED), fail.Unavailable, true},
		{"answer cut short", OpUpdate, io.ErrUnexpectedEOF, fail.Unavailable, true},
		{"command deadline", OpApply, context.DeadlineExceeded, fail.Unavailable, true},
		{"marshal failure (local)", OpApply, errors.New("json: unsupported value: NaN"), fail.Other, false},
		{"server certificate unknown (setup)", OpUpdate, &url.Error{Op: "Put", URL: "u", Err: x509.UnknownAuthorityError{}}, fail.Invalid, false},
		{"host does not resolve (setup)", OpRead, &url.Error{Op: "Get", URL: "u", Err: &net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", Name: "k8s.invalid", IsNotFound: true}}}, fail.Invalid, false},
		{"credential plugin fails (setup)", OpApply, &url.Error{Op: "Patch", URL: "u", Err: errors.New("getting credentials: exec: executable aws not found")}, fail.Invalid, false},
		{"DNS timeout (no answer)", OpRead, &url.Error{Op: "Get", URL: "u", Err: &net.DNSError{Err: "i/o timeout", IsTimeout: true}}, fail.Unavailable, true},
		{"already classified", OpUpdate, fail.Errorf(fail.Tamper, "head tampered"), fail.Tamper, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Classify(tt.op, "head ns/x", tt.err)
			if c := fail.ClassOf(got); c != tt.class {
				t.Errorf("Classify = %v (class %v), want class %v", got, c, tt.class)
			}
			if u := Unknown(tt.err); u != tt.unknown {
				t.Errorf("Unknown = %v, want %v", u, tt.unknown)
			}
			if Transient(tt.err) != tt.unknown {
				t.Errorf("Transient differs from Unknown")
			}
			if !errors.Is(got, tt.err) && fail.ClassOf(tt.err) == fail.Other {
				t.Errorf("the classified error lost its cause: %v", got)
			}
		})
	}
	if Classify(OpRead, "x", nil) != nil || Unknown(nil) {
		t.Error("nil must stay nil")
	}
}
