package core

import (
	"errors"
	"fmt"
)

// Sentinel errors. Each error the core returns wraps exactly one of them, so edges can
// map it with errors.Is: ErrInvalid to gRPC InvalidArgument / HTTP 400 / JetStream Term,
// ErrRefused to gRPC FailedPrecondition / HTTP 409 / JetStream Term, ErrUnavailable to
// gRPC Unavailable / HTTP 503 / JetStream Nak with delay. When the core returns any of
// them, it has changed nothing.
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
