// Package cas is the one compare-and-swap kernel of kubectl-ql3: exact
// reads of one named object, create and resourceVersion-carrying update,
// the settlement of every write whose answer never came by reading the
// object again, the classifier that turns an API answer into an exit class,
// Swap (the read-check-build-write skeleton of every sibling ceremony) and
// the read of the cluster identity. The permission review that runs before
// any write is package access's: Swap only asks it (Swap.Review).
//
// The deployment Head (package ceremony) and every sibling operation (the
// package pointer, the worker credential, the keyset ledger, environment
// bundles) write through this package and nowhere else, so that "what do we
// know after this answer" is decided once (docs/ceremony.md §6.3).
package cas

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/url"
	"strings"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// Op is the kind of request an error answered; it decides what a 404
// means.
type Op int

const (
	// OpRead is a GET or LIST.
	OpRead Op = iota
	// OpCreate is a POST of a new object.
	OpCreate
	// OpUpdate is a PUT carrying a resourceVersion.
	OpUpdate
	// OpApply is a server-side apply (PATCH), real or dry-run.
	OpApply
	// OpDelete is a DELETE with preconditions.
	OpDelete
)

// StatusCode is the HTTP status the API server answered with, or 0 when no
// answer arrived (or err is not an API answer).
func StatusCode(err error) int {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		return int(st.Status().Code)
	}
	return 0
}

// Network reports whether err is a failure of the exchange itself rather
// than an answer: a broken or refused connection, a reset, an answer cut
// short, a client-side timeout (--request-timeout) or a deadline of the
// command. Such a request may or may not have reached the server.
func Network(err error) bool {
	if err == nil || StatusCode(err) != 0 || Setup(err) {
		return false
	}
	var ue *url.Error
	var ne net.Error
	return errors.As(err, &ue) || errors.As(err, &ne) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// Setup reports whether err is a failure of the caller's own setup that no
// request reached the server with and no rerun will cure: a server
// certificate that does not verify, a host name that does not resolve, a
// credential plugin that fails. It is invalid input (exit 2), never
// "retry".
func Setup(err error) bool {
	var (
		unknownCA   x509.UnknownAuthorityError
		invalidCert x509.CertificateInvalidError
		hostname    x509.HostnameError
		verify      *tls.CertificateVerificationError
		dns         *net.DNSError
	)
	switch {
	case errors.As(err, &unknownCA), errors.As(err, &invalidCert), errors.As(err, &hostname), errors.As(err, &verify):
		return true
	case errors.As(err, &dns) && dns.IsNotFound:
		return true
	}
	// client-go's exec credential plugin: "getting credentials: …".
	return strings.Contains(err.Error(), "getting credentials: ")
}

// Unknown reports whether a failed write may nevertheless have been
// carried out: no answer arrived (Network), or the server answered that it
// could not finish in time or was overloaded (408, 429, 5xx) — an etcd
// write can land after the API server gave up waiting for it. Only a
// definite answer (2xx, or a 4xx other than 408 and 429) tells what
// happened; everything Unknown is settled by reading the object again.
func Unknown(err error) bool {
	if err == nil {
		return false
	}
	switch code := StatusCode(err); {
	case code == 0:
		return Network(err)
	default:
		return code == 408 || code == 429 || code >= 500
	}
}

// Transient reports whether a failed request is worth sending again as it
// is: exactly the Unknown outcomes. A local error (a kind the RESTMapper
// does not know, an object that does not marshal) is neither: it would fail
// the same way again.
func Transient(err error) bool { return Unknown(err) }

// Classify turns the error of request op on the object named by what into
// the outcome class a script acts on (exit code), keeping the API server's
// message. An error that already carries a class keeps it.
//
//   - 401, 403 (RBAC, or an admission webhook that answers Forbidden), 400,
//     422 (validation, ValidatingAdmissionPolicy, most webhook denials),
//     405, 406, 413, 415, a kind the API server does not serve: invalid (2) —
//     the input or the caller's setup, not the network, must change.
//   - 409 and AlreadyExists: conflict (3). 404 on an update or a delete:
//     conflict (3), the object was removed under us.
//   - 404 on a read, create or apply: invalid (2) (a namespace or a kind that
//     does not exist).
//   - Unknown outcomes (no answer, 408, 429, 5xx): unavailable (4).
//   - Anything else (a local failure): other (1).
func Classify(op Op, what string, err error) error {
	if err == nil {
		return nil
	}
	if fail.ClassOf(err) != fail.Other {
		return err
	}
	wrap := func(c fail.Class) error { return fail.Errorf(c, "%s: %w", what, err) }
	switch {
	case Setup(err):
		return wrap(fail.Invalid)
	case apierrors.IsConflict(err), apierrors.IsAlreadyExists(err):
		return wrap(fail.Conflict)
	case apierrors.IsNotFound(err) && (op == OpUpdate || op == OpDelete):
		return fail.Errorf(fail.Conflict, "%s: removed by someone else: %w", what, err)
	case Unknown(err):
		return wrap(fail.Unavailable)
	case meta.IsNoMatchError(err):
		return wrap(fail.Invalid)
	}
	switch StatusCode(err) {
	case 400, 401, 403, 404, 405, 406, 410, 413, 415, 422:
		return wrap(fail.Invalid)
	}
	return wrap(fail.Other)
}

// Decisive is the class of several failures of one step (one per object):
// the one that decides what to do, conflict (3) before invalid input (2)
// before a local failure (1) before an unknown outcome (4) — a rerun
// cannot cure the first three.
func Decisive(op Op, what string, errs []error) fail.Class {
	rank := map[fail.Class]int{fail.Conflict: 4, fail.Invalid: 3, fail.Other: 2, fail.Unavailable: 1}
	class := fail.Unavailable
	for _, err := range errs {
		if c := fail.ClassOf(Classify(op, what, err)); rank[c] > rank[class] {
			class = c
		}
	}
	return class
}
