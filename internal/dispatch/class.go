package dispatch

import (
	"context"
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/event"
)

// Class is the transport-independent answer to one event. Every way in maps a Class to
// its own protocol (docs/design.md, "Answers"); the values are the `result` label of
// configmap_attacher_events_total.
type Class string

// Answer classes, in the order Classify tests them.
const (
	// ClassOK: done (something attached, or nothing needed).
	ClassOK Class = "ok"
	// ClassIgnored: acknowledged without work (not a ReplicaSet ADD event).
	ClassIgnored Class = "ignored"
	// ClassBusy: too many events in flight; retry soon.
	ClassBusy Class = "busy"
	// ClassShuttingDown: the service is stopping; retry (another replica, or later).
	ClassShuttingDown Class = "shutting-down"
	// ClassDeadline: the event's work took longer than the execute timeout; retry.
	ClassDeadline Class = "deadline"
	// ClassCanceled: the caller went away.
	ClassCanceled Class = "canceled"
	// ClassInvalid: bad input; a retry cannot help; nothing changed.
	ClassInvalid Class = "invalid"
	// ClassRefused: a safety rule forbids acting on the event; nothing changed.
	ClassRefused Class = "refused"
	// ClassPermanent: the cluster refused a write for good (RBAC, admission, invalid
	// object); given up and counted. Writes to other objects may have happened.
	ClassPermanent Class = "permanent"
	// ClassUnavailable: a transient failure of the cluster; retry later.
	ClassUnavailable Class = "unavailable"
	// ClassUnsupported: the request asks for something this service does not do.
	ClassUnsupported Class = "unsupported"
	// ClassUnauthenticated: the caller did not prove who it is (HTTP bearer token).
	ClassUnauthenticated Class = "unauthenticated"
	// ClassFailed: an error of no other class; treated as transient.
	ClassFailed Class = "failed"
)

// Classes lists every Class, for documentation and tests.
var Classes = []Class{ClassOK, ClassIgnored, ClassBusy, ClassShuttingDown, ClassDeadline, ClassCanceled,
	ClassInvalid, ClassRefused, ClassPermanent, ClassUnavailable, ClassUnsupported, ClassUnauthenticated, ClassFailed}

// ErrBusy means MaxInFlight events are being handled already (ClassBusy).
var ErrBusy = errors.New("too many events in flight")

// ErrShuttingDown means the dispatcher has stopped taking events (ClassShuttingDown).
var ErrShuttingDown = errors.New("shutting down")

// ErrUnsupported means the request asks for something this service does not do.
var ErrUnsupported = errors.New("unsupported")

// ErrUnauthenticated means a request carried no valid credentials (HTTP 401).
var ErrUnauthenticated = errors.New("unauthenticated")

// Classify returns err's class. A timeout is tested before ErrUnavailable, since the
// core reports a cut-short API call as unavailable; a transient failure of one object
// is tested before a permanent one, since a retry redoes it.
func Classify(err error) Class {
	switch {
	case err == nil:
		return ClassOK
	case errors.Is(err, event.ErrNotAdd):
		return ClassIgnored
	case errors.Is(err, ErrBusy):
		return ClassBusy
	case errors.Is(err, ErrShuttingDown):
		return ClassShuttingDown
	case errors.Is(err, context.DeadlineExceeded):
		return ClassDeadline
	case errors.Is(err, context.Canceled):
		return ClassCanceled
	case errors.Is(err, core.ErrInvalid):
		return ClassInvalid
	case errors.Is(err, core.ErrRefused):
		return ClassRefused
	case errors.Is(err, core.ErrUnavailable):
		return ClassUnavailable
	case errors.Is(err, core.ErrPermanent):
		return ClassPermanent
	case errors.Is(err, ErrUnsupported):
		return ClassUnsupported
	case errors.Is(err, ErrUnauthenticated):
		return ClassUnauthenticated
	}
	return ClassFailed
}

// Retryable reports whether a retry of the same event may succeed: busy, shutting down,
// deadline, canceled (work cut short by a stop), unavailable, and unclassified failures.
func (c Class) Retryable() bool {
	switch c {
	case ClassBusy, ClassShuttingDown, ClassDeadline, ClassCanceled, ClassUnavailable, ClassFailed:
		return true
	}
	return false
}

// FieldOf returns the field a *core.FieldError in err names, or "".
func FieldOf(err error) string {
	var fe *core.FieldError
	if errors.As(err, &fe) {
		return fe.Field
	}
	return ""
}

// Forbidden reports whether a's permanent failure was RBAC's refusal of a write: the
// ways in answer it as "permission denied" (gRPC PermissionDenied, HTTP 403) rather than
// the class's plain permanent failure. It refines the class, never changes it.
func (a Answer) Forbidden() bool {
	var pe *core.PermanentError
	return a.Class == ClassPermanent && errors.As(a.Err, &pe) && apierrors.IsForbidden(pe.Cause)
}

// Field returns the input field an invalid answer names (a *core.FieldError), or "".
func (a Answer) Field() string { return FieldOf(a.Err) }

// Failure is the Answer to an error a way in met outside the dispatcher (a reply it
// could not encode, a request of its own protocol it could not read) whose class the
// way in knows: nothing is counted or logged, and nothing classifies err again.
func Failure(c Class, err error) Answer {
	return Answer{Class: c, Err: err, Response: Response{Message: err.Error(), Error: err.Error()}}
}
