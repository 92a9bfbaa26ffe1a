// Package trigger holds the two ways in that an Argo Events Sensor triggers: a gRPC
// server implementing Argo Events' custom trigger protocol (Trigger service of
// github.com/argoproj/argo-events/pkg/sensors/triggers) and an HTTP receiver for
// CloudEvents (binary and structured mode) and plain JSON (Argo Events' HTTP trigger).
//
// Both are thin adapters over package dispatch: they decode the spec and the payload,
// call the dispatcher, and map its answer class to a gRPC code or an HTTP status (the
// table in docs/design.md, "Answers"); nothing else is decided here.
package trigger
