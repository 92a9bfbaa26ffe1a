package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/event"
)

// OwnedElsewhereError is what Clusters answers for a cluster another replica of the
// fleet owns (docs/design.md, "Fleet"). Owner is that replica's forwarding address, ""
// when no replica owns it at the moment (a shard between owners); Identity is its
// identity (the pod's name), when known. Without a Forwarder it is transient: it wraps
// core.ErrUnavailable.
type OwnedElsewhereError struct {
	Cluster, Owner, Identity string
}

func (e *OwnedElsewhereError) Error() string {
	if e.Owner == "" {
		return fmt.Sprintf("cluster %q: no replica owns it at the moment; retry", clipName(e.Cluster))
	}
	return fmt.Sprintf("cluster %q is owned by the replica %s", clipName(e.Cluster), e.owner())
}

// owner names the owning replica: "identity at address", or the address alone.
func (e *OwnedElsewhereError) owner() string {
	if e.Identity == "" {
		return "at " + e.Owner
	}
	return e.Identity + " at " + e.Owner
}

// Unwrap makes the error transient (core.ErrUnavailable).
func (e *OwnedElsewhereError) Unwrap() error { return core.ErrUnavailable }

// Forwarder hands an event to the replica owning its cluster (owner: its forwarding
// address) and returns that replica's answer, or an error when the owner could not
// answer (not reached, timed out, out of protocol): the dispatcher then answers the
// event retry-later. The server's forwarding client implements it.
type Forwarder interface {
	Forward(ctx context.Context, owner string, req Request) (Answer, error)
}

// forwardedMetric counts events handed to another replica, by path and the owner's
// answer: configmap_attacher_events_forwarded_total{path,result}. The owner counts the
// event in configmap_attacher_events_total, the replica it came in on does not.
func forwardedMetric(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "configmap_attacher_events_forwarded_total",
		Help: "Events that came in on a replica not owning their cluster and were answered by the owner, by path and result."},
		[]string{"path", "result"})
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			return are.ExistingCollector.(*prometheus.CounterVec)
		}
	}
	return c
}

// forward answers req from the replica owning its cluster: at most one hop (an event
// that came forwarded and is not owned here either is answered retry-later). An owner
// that could not answer makes the event retry-later, never lost, and one warning here,
// where the event came in (the owner never saw it).
func (d *Dispatcher) forward(ctx context.Context, req Request, resp Response, oe *OwnedElsewhereError) (Answer, bool) {
	if d.forwarder == nil || req.Forwarded || oe.Owner == "" {
		return Answer{}, false
	}
	start := time.Now()
	ctx, cancel := d.workContext(ctx)
	defer cancel()
	a, err := d.forwarder.Forward(ctx, oe.Owner, req)
	if err != nil {
		a = d.ownerDidNotAnswer(ctx, req, resp, oe, err)
	}
	d.forwarded.WithLabelValues(string(req.Path), string(a.Class)).Inc()
	d.log.Debug("event forwarded", "path", req.Path, "cluster", clipName(oe.Cluster), "owner", oe.Identity, "ownerAddress", oe.Owner, "result", a.Class,
		"duration", time.Since(start).Round(time.Microsecond))
	return a, true
}

// ownerDidNotAnswer is the answer to an event its owner could not answer: unavailable,
// or the class of the end of ctx. It logs one warning naming the cluster, the owner and
// the cause (the cause is the forwarding client's: no token, no Secret data in it).
func (d *Dispatcher) ownerDidNotAnswer(ctx context.Context, req Request, resp Response, oe *OwnedElsewhereError, err error) Answer {
	class := ClassUnavailable
	if ctx.Err() != nil {
		class = Classify(context.Cause(ctx))
	}
	attrs := []any{"path", req.Path, "cluster", clipName(oe.Cluster), "owner", oe.Identity, "ownerAddress", oe.Owner,
		"namespace", clipName(resp.Namespace)}
	if resp.Revision != "" {
		attrs = append(attrs, "revision", clipName(resp.Revision))
	} else {
		attrs = append(attrs, "replicaSet", clipName(resp.ReplicaSet))
	}
	d.log.Warn("the owner of the event's cluster could not answer; the event is answered retry-later",
		append(attrs, "result", class, "err", err)...)
	return AnswerOf(class, fmt.Sprintf("forwarding to the cluster's owner %s: %v; retry", oe.owner(), err), "", resp)
}

// ErrorOf rebuilds an error of class c with message msg (and the field of an invalid
// input), so that Classify(ErrorOf(c, ...)) == c: the answer of another replica keeps
// its class on this one.
func ErrorOf(c Class, msg, field string) error {
	if c == ClassOK {
		return nil
	}
	if c == ClassInvalid && field != "" {
		return &remoteError{msg: msg, cause: &core.FieldError{Field: field, Msg: msg}}
	}
	return &remoteError{msg: msg, cause: classCause[c]}
}

var classCause = map[Class]error{ClassIgnored: event.ErrNotAdd, ClassBusy: ErrBusy, ClassShuttingDown: ErrShuttingDown,
	ClassDeadline: context.DeadlineExceeded, ClassCanceled: context.Canceled, ClassInvalid: core.ErrInvalid,
	ClassRefused: core.ErrRefused, ClassPermanent: core.ErrPermanent, ClassUnavailable: core.ErrUnavailable,
	ClassUnsupported: ErrUnsupported, ClassUnauthenticated: ErrUnauthenticated}

type remoteError struct {
	msg   string
	cause error // nil for ClassFailed
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.cause }

// AnswerOf builds the Answer of another replica from its class, error text, invalid
// field and response.
func AnswerOf(c Class, errText, field string, resp Response) Answer {
	if errText == "" {
		errText = string(c)
	}
	return Answer{Class: c, Err: ErrorOf(c, errText, field), Response: resp, Event: eventOf(resp)}
}

// ForbiddenAnswerOf is AnswerOf for another replica's permanent failure that was RBAC's
// refusal of a write (Answer.Forbidden there): it is Forbidden on this side too, so a
// forwarded event is answered "permission denied" exactly as a local one.
func ForbiddenAnswerOf(errText string, resp Response) Answer {
	a := AnswerOf(ClassPermanent, errText, "", resp)
	a.Err = &remoteError{msg: a.Err.Error(), cause: &core.PermanentError{
		Cause: apierrors.NewForbidden(schema.GroupResource{}, "", errors.New(a.Err.Error()))}}
	return a
}
