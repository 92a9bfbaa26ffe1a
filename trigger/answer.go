package trigger

import (
	"context"
	"errors"
	"net/http"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
)

// Dispatcher is what both servers of the custom trigger need of the dispatcher, the one
// way they bind it (*dispatch.Dispatcher is one): run a decoded event, answer one refused
// before dispatch, and parse a spec from the service's defaults.
type Dispatcher interface {
	Dispatch(ctx context.Context, req dispatch.Request) dispatch.Answer
	Reject(ctx context.Context, path dispatch.Path, ev core.Event, err error) dispatch.Answer
	ParseSpec(spec map[string]string) (core.Options, error)
}

var _ Dispatcher = (*dispatch.Dispatcher)(nil)

// The two tables below are the only place an answer becomes a protocol's (docs/design.md,
// "Answers"): the dispatcher's Answer carries its class, nothing here classifies an error.
// A permanent failure that was RBAC's refusal (Answer.Forbidden) is the one refinement.

// grpcCodes maps an answer class to its gRPC code. ClassOK, ClassIgnored and
// ClassFailed are not errors: Execute returns the Response (for ClassFailed it names
// the failed objects and ApplyPolicy fails); a class missing here is Internal.
var grpcCodes = map[dispatch.Class]codes.Code{
	dispatch.ClassOK:              codes.OK,
	dispatch.ClassIgnored:         codes.OK,
	dispatch.ClassBusy:            codes.ResourceExhausted,
	dispatch.ClassShuttingDown:    codes.Unavailable,
	dispatch.ClassDeadline:        codes.DeadlineExceeded,
	dispatch.ClassCanceled:        codes.Canceled,
	dispatch.ClassInvalid:         codes.InvalidArgument,
	dispatch.ClassRefused:         codes.FailedPrecondition,
	dispatch.ClassPermanent:       codes.FailedPrecondition,
	dispatch.ClassUnavailable:     codes.Unavailable,
	dispatch.ClassUnsupported:     codes.Unimplemented,
	dispatch.ClassUnauthenticated: codes.Unauthenticated,
	dispatch.ClassFailed:          codes.Internal,
}

// httpStatuses maps an answer class to its HTTP status; a class missing here is 500.
var httpStatuses = map[dispatch.Class]int{
	dispatch.ClassOK:              http.StatusOK,
	dispatch.ClassIgnored:         http.StatusOK,
	dispatch.ClassBusy:            http.StatusTooManyRequests,
	dispatch.ClassShuttingDown:    http.StatusServiceUnavailable,
	dispatch.ClassDeadline:        http.StatusServiceUnavailable,
	dispatch.ClassCanceled:        http.StatusServiceUnavailable,
	dispatch.ClassInvalid:         http.StatusBadRequest,
	dispatch.ClassRefused:         http.StatusConflict,
	dispatch.ClassPermanent:       http.StatusUnprocessableEntity,
	dispatch.ClassUnavailable:     http.StatusServiceUnavailable,
	dispatch.ClassUnsupported:     http.StatusNotImplemented,
	dispatch.ClassUnauthenticated: http.StatusUnauthorized,
	dispatch.ClassFailed:          http.StatusInternalServerError,
}

// answered reports whether a is answered with its Response (done, ignored, or failed
// objects the Response names) rather than as an error of the protocol.
func answered(a dispatch.Answer) bool {
	switch a.Class {
	case dispatch.ClassOK, dispatch.ClassIgnored, dispatch.ClassFailed:
		return true
	}
	return false
}

// GRPCCode is a's gRPC code: grpcCodes, PermissionDenied when RBAC forbade a write.
func GRPCCode(a dispatch.Answer) codes.Code {
	if a.Forbidden() {
		return codes.PermissionDenied
	}
	if code, ok := grpcCodes[a.Class]; ok {
		return code
	}
	return codes.Internal
}

// GRPCError is a's gRPC status error (nil for an answer without error): its code
// (GRPCCode), its message, and for invalid input a BadRequest detail naming the field.
func GRPCError(a dispatch.Answer) error {
	if a.Err == nil {
		return nil
	}
	st := status.New(GRPCCode(a), a.Err.Error())
	var fe *core.FieldError
	if a.Class == dispatch.ClassInvalid && errors.As(a.Err, &fe) {
		if d, derr := st.WithDetails(&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{
			{Field: fe.Field, Description: fe.Msg}}}); derr == nil {
			st = d
		}
	}
	return st.Err()
}

// HTTPStatus is a's HTTP status: httpStatuses, 403 when RBAC forbade a write.
func HTTPStatus(a dispatch.Answer) int {
	if a.Forbidden() {
		return http.StatusForbidden
	}
	if st, ok := httpStatuses[a.Class]; ok {
		return st
	}
	return http.StatusInternalServerError
}
