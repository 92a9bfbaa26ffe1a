// Package trigger serves the configmap-attacher core to event sources: a gRPC server
// implementing Argo Events' custom trigger protocol (Trigger service of
// github.com/argoproj/argo-events/pkg/sensors/triggers) and an HTTP receiver for
// CloudEvents (binary and structured mode) and plain JSON (Argo Events' HTTP trigger).
//
// The package is an adapter: payloads are decoded by package eventsource, the work is
// done by core.Attacher, and the core's sentinel errors are mapped to transport answers
// only here (ErrInvalid → InvalidArgument / 400, ErrRefused → FailedPrecondition / 409,
// ErrUnavailable → Unavailable / 503, a server-side timeout → DeadlineExceeded / 503,
// too many events in flight → ResourceExhausted / 429).
package trigger
