package core

import (
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Sentinel errors. Each error the core returns wraps exactly one of them, so edges can
// map it with errors.Is: ErrInvalid to gRPC InvalidArgument / HTTP 400 / JetStream Term,
// ErrRefused to gRPC FailedPrecondition / HTTP 409 / JetStream Term, ErrUnavailable to
// gRPC Unavailable / HTTP 503 / JetStream Nak with delay, ErrPermanent as documented
// below. ErrInvalid and ErrRefused mean nothing changed; after ErrUnavailable and
// ErrPermanent, writes to other objects of the same call may have been made (they are
// idempotent). An Attach error wraps ErrPermanent only when no failure was transient.
var (
	// ErrInvalid: the input itself is malformed (bad spec key or value, bad payload,
	// a name that is not a valid object name, an unknown cluster).
	ErrInvalid = errors.New("invalid input")
	// ErrRefused: the input is well formed but a safety rule forbids acting on it
	// (ReplicaSet gone or terminating, UID mismatch, cross-namespace reference,
	// namespace not allowed).
	ErrRefused = errors.New("refused")
	// ErrUnavailable: a transient failure talking to the cluster; retrying may succeed.
	ErrUnavailable = errors.New("cluster unavailable")
	// ErrPermanent: the cluster answered, and a retry cannot help until someone changes
	// something (RBAC forbids the write, an admission webhook or policy denies it, the
	// object is invalid or too large). Edges answer it permanently (gRPC
	// FailedPrecondition or PermissionDenied, HTTP 4xx, JetStream Term) and count it as
	// given up. Writes made before it (to other objects) stay; they are idempotent.
	ErrPermanent = errors.New("permanent failure")
)

// PermanentError is an ErrPermanent naming the object and the apiserver's cause.
type PermanentError struct {
	// Object is "Kind namespace/name" of the object the write was refused for.
	Object string
	// Cause is the apiserver's error (apierrors.IsForbidden, IsInvalid, ...).
	Cause error
}

func (e *PermanentError) Error() string {
	return fmt.Sprintf("%s: %s: %v", e.Object, ErrPermanent, e.Cause)
}

// Unwrap makes errors.Is(err, ErrPermanent) true and keeps the cause reachable.
func (e *PermanentError) Unwrap() []error { return []error{ErrPermanent, e.Cause} }

// FieldError is an ErrInvalid naming the offending input field (a spec key such as
// "configMaps", or a payload path such as "body.metadata.name").
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return fmt.Sprintf("%s: %s", e.Field, e.Msg) }

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *FieldError) Unwrap() error { return ErrInvalid }

// Invalidf returns a *FieldError for field with a formatted message.
func Invalidf(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// RefusedError is an ErrRefused with the reason a safety rule gave.
type RefusedError struct {
	Reason string
}

func (e *RefusedError) Error() string { return "refused: " + e.Reason }

// Unwrap makes errors.Is(err, ErrRefused) true.
func (e *RefusedError) Unwrap() error { return ErrRefused }

func refusedf(format string, args ...any) error {
	return &RefusedError{Reason: fmt.Sprintf(format, args...)}
}

// unavailable wraps err so that errors.Is(err, ErrUnavailable) holds while the cause
// stays reachable through errors.Is/As.
func unavailable(what string, err error) error {
	return fmt.Errorf("%s: %w: %w", what, ErrUnavailable, err)
}

// IsPermanent reports whether err is an apiserver answer that no retry can change until
// someone changes something: Forbidden (RBAC, an admission webhook's or a
// ValidatingAdmissionPolicy's denial), Unauthorized (the credentials are rejected),
// Invalid, BadRequest, RequestEntityTooLarge (also the storage's size refusals, which
// the apiserver answers as a bare 500), MethodNotSupported, NotAcceptable
// and UnsupportedMediaType. Everything else is transient: timeouts, 5xx, 429,
// conflicts, network and context errors. NotFound is neither: callers decide what a
// missing object means before asking.
func IsPermanent(err error) bool {
	switch {
	case err == nil, apierrors.IsNotFound(err):
		return false
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err), apierrors.IsInvalid(err),
		apierrors.IsBadRequest(err), apierrors.IsRequestEntityTooLargeError(err),
		apierrors.IsMethodNotSupported(err), apierrors.IsNotAcceptable(err), apierrors.IsUnsupportedMediaType(err):
		return true
	}
	return tooLargeForStorage(err)
}

// tooLargeForStorage reports the apiserver's 500 answers for an object that its storage
// cannot hold: etcd's refusal over its request limit (1.5 MiB by default) and the etcd
// client's refusal over its message limit (2 MiB). The apiserver passes both through
// with code 500 and no reason, so only their text identifies them.
func tooLargeForStorage(err error) bool {
	var st apierrors.APIStatus
	if !errors.As(err, &st) || st.Status().Code != 500 { // HTTP 500, the code these refusals come with
		return false
	}
	msg := st.Status().Message
	return strings.Contains(msg, "etcdserver: request is too large") || strings.Contains(msg, "trying to send message larger than max")
}

// apiFailure wraps a failed read or write of object ("Kind namespace/name"): a
// *PermanentError when IsPermanent(err), else an ErrUnavailable naming what was done.
func apiFailure(what, object string, err error) error {
	if IsPermanent(err) {
		return &PermanentError{Object: object, Cause: err}
	}
	return unavailable(what+" "+object, err)
}
