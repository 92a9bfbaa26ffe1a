// Package core attaches config revisions (ConfigMaps and Secrets) to the ReplicaSets
// that use them, so that Kubernetes' garbage collector deletes a revision exactly when
// the last ReplicaSet using it is gone.
//
// Every ingress path (gRPC custom trigger, HTTP CloudEvents, EventBus subscription,
// the built-in watcher, the one-shot CLI) decodes its input into an Event and calls
// Attacher.Attach. The package imports no transport; callers map the sentinel errors
// (ErrInvalid, ErrRefused, ErrUnavailable, ErrPermanent) to their own answers at the edge.
//
// The safety rules implemented here are numbered as in docs/design.md
// ("Safety rules"): the payload is untrusted (1), dead owners are refused (2),
// owners are only ever added (3), same namespace and opt-in only (4), idempotent (5),
// concurrent writers lose nothing (6).
package core
