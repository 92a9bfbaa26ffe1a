package trigger

import (
	"errors"
	"net/http"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
)

// grpcCodes maps an answer class to its gRPC code. ClassOK, ClassIgnored and
// ClassFailed are not errors: Execute returns the Response (for ClassFailed it names
// the failed objects and ApplyPolicy fails).
var grpcCodes = map[dispatch.Class]codes.Code{
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
}

// GRPCError maps err to a gRPC status error by its class: InvalidArgument (with a
// BadRequest detail naming the field), FailedPrecondition for a refusal or a permanent
// failure (PermissionDenied when RBAC forbade the write), Unavailable, DeadlineExceeded,
// ResourceExhausted, Unimplemented; Internal for anything else. nil stays nil.
func GRPCError(err error) error {
	if err == nil {
		return nil
	}
	class := dispatch.Classify(err)
	code, ok := grpcCodes[class]
	if !ok {
		code = codes.Internal
	}
	if class == dispatch.ClassPermanent && forbidden(err) {
		code = codes.PermissionDenied
	}
	st := status.New(code, err.Error())
	var fe *core.FieldError
	if class == dispatch.ClassInvalid && errors.As(err, &fe) {
		if d, derr := st.WithDetails(&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{
			{Field: fe.Field, Description: fe.Msg}}}); derr == nil {
			st = d
		}
	}
	return st.Err()
}

// httpStatuses maps an answer class to its HTTP status.
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

// HTTPStatus maps err to an HTTP status by its class: 200 for nil, 400 invalid, 409
// refused, 422 permanent (403 when RBAC forbade the write), 429 busy, 503 unavailable,
// timeout or shutting down, 501 unsupported, 500 otherwise.
func HTTPStatus(err error) int {
	class := dispatch.Classify(err)
	if class == dispatch.ClassPermanent && forbidden(err) {
		return http.StatusForbidden
	}
	return httpStatuses[class]
}

// forbidden reports whether a permanent failure was RBAC's refusal.
func forbidden(err error) bool {
	var pe *core.PermanentError
	return errors.As(err, &pe) && apierrors.IsForbidden(pe.Cause)
}
