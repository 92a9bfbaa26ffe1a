package trigger

import (
	"context"
	"errors"
	"net/http"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

// Class is the transport-independent category of an error.
type Class string

// Error classes, in the order Classify tests them.
const (
	ClassOK          Class = "ok"
	ClassBusy        Class = "busy"
	ClassDeadline    Class = "deadline"
	ClassCanceled    Class = "canceled"
	ClassInvalid     Class = "invalid"
	ClassRefused     Class = "refused"
	ClassUnavailable Class = "unavailable"
	ClassUnsupported Class = "unsupported"
	// ClassFailed: some object failed permanently (e.g. forbidden); the result says which.
	ClassFailed Class = "failed"
)

// Classify returns err's class. A timeout is tested before ErrUnavailable, since the
// core reports a cut-short API call as unavailable.
func Classify(err error) Class {
	switch {
	case err == nil:
		return ClassOK
	case errors.Is(err, ErrBusy):
		return ClassBusy
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
	case errors.Is(err, ErrUnsupported):
		return ClassUnsupported
	}
	return ClassFailed
}

// GRPCError maps err to a gRPC status error: ErrInvalid → InvalidArgument (with a
// BadRequest detail naming the field), ErrRefused → FailedPrecondition, ErrUnavailable
// → Unavailable, timeout → DeadlineExceeded, ErrBusy → ResourceExhausted,
// ErrUnsupported → Unimplemented, anything else → Internal. nil stays nil.
func GRPCError(err error) error {
	var code codes.Code
	switch Classify(err) {
	case ClassOK:
		return nil
	case ClassBusy:
		code = codes.ResourceExhausted
	case ClassDeadline:
		code = codes.DeadlineExceeded
	case ClassCanceled:
		code = codes.Canceled
	case ClassInvalid:
		st := status.New(codes.InvalidArgument, err.Error())
		var fe *core.FieldError
		if errors.As(err, &fe) {
			if d, derr := st.WithDetails(&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{
				{Field: fe.Field, Description: fe.Msg}}}); derr == nil {
				st = d
			}
		}
		return st.Err()
	case ClassRefused:
		code = codes.FailedPrecondition
	case ClassUnavailable:
		code = codes.Unavailable
	case ClassUnsupported:
		code = codes.Unimplemented
	default:
		code = codes.Internal
	}
	return status.Error(code, err.Error())
}

// HTTPStatus maps err to an HTTP status code: 200 for nil, 400 invalid, 409 refused,
// 429 busy, 503 unavailable / timeout / shutting down, 501 unsupported, 500 otherwise.
func HTTPStatus(err error) int {
	switch Classify(err) {
	case ClassOK:
		return http.StatusOK
	case ClassBusy:
		return http.StatusTooManyRequests
	case ClassDeadline, ClassCanceled, ClassUnavailable:
		return http.StatusServiceUnavailable
	case ClassInvalid:
		return http.StatusBadRequest
	case ClassRefused:
		return http.StatusConflict
	case ClassUnsupported:
		return http.StatusNotImplemented
	}
	return http.StatusInternalServerError
}

// FieldOf returns the field a *core.FieldError in err names, or "".
func FieldOf(err error) string {
	var fe *core.FieldError
	if errors.As(err, &fe) {
		return fe.Field
	}
	return ""
}
