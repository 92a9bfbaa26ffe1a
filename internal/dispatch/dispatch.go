// Package dispatch is the one way from every ingress path to the core: the gRPC custom
// trigger, the HTTP receiver, the EventBus subscription and the built-in watcher decode
// their input into a Request, call Dispatch, and map the typed Answer to their own
// protocol. The dispatcher owns what is the same on every path: routing to the cluster
// (with its health gate), the bound on work in flight, the execute timeout, the drain
// on shutdown, classifying the outcome, metrics, logs, `operation: gc` and the sweep
// after an attach (docs/design.md, "One way in").
package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/gc"
)

// Defaults of Config.
const (
	DefaultMaxInFlight    = 64
	DefaultExecuteTimeout = 30 * time.Second
	DefaultStopGrace      = 30 * time.Second
)

// Path names a way in; it labels metrics and logs.
type Path string

// The ways in.
const (
	PathGRPC     Path = "grpc"
	PathHTTP     Path = "http"
	PathEventBus Path = "eventbus"
	PathWatcher  Path = "watcher"
	// PathRevision is the revision side of the watcher: a ConfigMap or Secret that
	// appeared or lost owners (docs/design.md, safety rule 9).
	PathRevision Path = "revision"
)

// pull reports whether the path pulls its events at its own pace (EventBus, watcher):
// such a path waits for a free slot, where a pushed event is answered busy at once.
func (p Path) pull() bool { return p == PathEventBus || p == PathWatcher || p == PathRevision }

// Request is one decoded event.
type Request struct {
	Path Path
	// Options are the event's effective options (Dispatcher.ParseSpec of its spec). The
	// zero value (no Operation: a way in without a spec of its own, the watcher) means
	// the service's defaults, which the dispatcher applies (Config.Defaults): no way in
	// holds a copy of them.
	Options core.Options
	// Event names the ReplicaSet. Event.Cluster is the cluster the event itself names
	// (Argo Events metadata, CloudEvent extension; "" for none); Options.Cluster wins
	// over it, the default cluster is the fallback.
	Event core.Event
	// Revision, when set, makes this a revision event: find every live user of that
	// ConfigMap or Secret and attach it (core.Attacher.AttachRevision); Event is then
	// unused. Revision.Cluster follows the same rule as Event.Cluster.
	Revision *core.RevisionEvent
	// Forwarded marks an event another replica of the fleet handed to this one: it is
	// never forwarded again.
	Forwarded bool
	// Replay marks a pulled event that replays an object which did not change (the
	// watcher's start-up replay and resync): it waits for one of the replay share of the
	// slots (a quarter of MaxInFlight) besides a shared one, so the replays of every
	// cluster together never hold more than that share and live events keep the rest
	// (docs/design.md, "The watcher's two lanes").
	Replay bool
}

// Response is the JSON result of one event (gRPC Execute, HTTP POST): the core's
// Result plus a one-line message, or the reason the event was ignored.
type Response struct {
	core.Result
	// Message summarises the outcome ("ReplicaSet shop/web: 1 attached").
	Message string `json:"message"`
	// Ignored is set, with the reason, when the event was acknowledged without work.
	Ignored string `json:"ignored,omitempty"`
	// GC is the sweep report of an `operation: gc` event.
	GC *gc.Report `json:"gc,omitempty"`
	// Error is the error the event ended with, if any.
	Error string `json:"error,omitempty"`
}

// Answer is the dispatcher's typed answer to one event.
type Answer struct {
	Class    Class
	Err      error
	Response Response
	// Event is the ReplicaSet the answer is about, as GaveUp takes it: Cluster is the
	// registered cluster the event reached ("" when it reached none), Namespace, Name and
	// UID as the response names them. A way in that stops retrying passes it to GaveUp.
	Event core.Event
}

// eventOf is the Answer.Event of a response.
func eventOf(r Response) core.Event {
	return core.Event{Cluster: r.Cluster, Namespace: r.Namespace, Name: r.ReplicaSet, UID: r.UID}
}

// Config configures a Dispatcher.
type Config struct {
	// Clusters resolves the event's cluster to its Attacher, and refuses a cluster whose
	// health probe fails (core.ErrUnavailable). Required.
	Clusters Clusters
	// Sweeps serves `operation: gc` and the sweep after an attach; nil makes
	// `operation: gc` unsupported.
	Sweeps Sweeps
	// Defaults are what an empty spec means on every path (core.DefaultOptions, with
	// IncludeSecrets set when the service allows Secrets). Zero means core.DefaultOptions.
	// The dispatcher is the one holder of them: ParseSpec starts from them, a Request
	// without Options gets them, Defaults returns them.
	Defaults *core.Options
	// MaxInFlight bounds the events handled at once, all paths together.
	MaxInFlight int
	// MaxInFlightPerCluster, when positive, bounds the events of one cluster handled at
	// once (at most MaxInFlight): a member cluster that hangs (its apiserver takes
	// connections and never answers) then holds at most this many of the shared slots
	// until its health probe marks it down. Zero: no bound of its own.
	MaxInFlightPerCluster int
	// ExecuteTimeout bounds the work for one event, on every path.
	ExecuteTimeout time.Duration
	// StopGrace is how long work in flight may go on once Run's context ends before it
	// is cancelled (a cancelled attach is safe: each patch is sent whole or not at all).
	StopGrace time.Duration
	// Metrics receives the metrics; nil means a fresh set.
	Metrics *Metrics
	// Logger receives one line per event; nil means slog.Default().
	Logger *slog.Logger
	// Observe, when set, receives every answer once it is counted and logged (the
	// server's once-per-object notes, internal/server).
	Observe func(Answer)
	// Forwarder, when set, hands an event whose cluster another replica owns
	// (*OwnedElsewhereError from Clusters) to that replica; nil answers it retry-later.
	Forwarder Forwarder
}

// Dispatcher runs events for every way in. Build it with New, run it with Run. It is
// safe for concurrent use.
type Dispatcher struct {
	clusters Clusters
	sweeps   Sweeps
	defaults core.Options
	timeout  time.Duration
	grace    time.Duration
	sem      chan struct{}
	// replay is the replay share of sem: a quarter of it (at least one), taken first by
	// a Request with Replay.
	replay chan struct{}
	// perCluster is MaxInFlightPerCluster; bySem holds each cluster's slots.
	perCluster int
	bySem      sync.Map // cluster name -> chan struct{}
	metrics    *Metrics
	log        *slog.Logger
	observe    func(Answer)
	forwarder  Forwarder
	forwarded  *prometheus.CounterVec

	mu       sync.Mutex // guards stopping and wg.Add against Run's wg.Wait
	stopping bool
	wg       sync.WaitGroup
	hard     context.Context // cancelled StopGrace after Run's context ends
	stopHard context.CancelFunc
}

// New validates cfg and returns a Dispatcher.
func New(cfg Config) (*Dispatcher, error) {
	if cfg.Clusters == nil {
		return nil, errors.New("dispatch: Config.Clusters is required")
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	if cfg.ExecuteTimeout <= 0 {
		cfg.ExecuteTimeout = DefaultExecuteTimeout
	}
	if cfg.StopGrace <= 0 {
		cfg.StopGrace = DefaultStopGrace
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	defaults := core.DefaultOptions()
	if cfg.Defaults != nil {
		defaults = *cfg.Defaults
	}
	hard, stop := context.WithCancel(context.Background())
	return &Dispatcher{clusters: cfg.Clusters, sweeps: cfg.Sweeps, defaults: defaults, timeout: cfg.ExecuteTimeout,
		grace: cfg.StopGrace, sem: make(chan struct{}, cfg.MaxInFlight), replay: make(chan struct{}, max(cfg.MaxInFlight/4, 1)), perCluster: min(cfg.MaxInFlightPerCluster, cfg.MaxInFlight),
		metrics: cfg.Metrics, log: cfg.Logger, observe: cfg.Observe, forwarder: cfg.Forwarder,
		forwarded: forwardedMetric(cfg.Metrics.Registry), hard: hard, stopHard: stop}, nil
}

// Metrics returns the dispatcher's metrics.
func (d *Dispatcher) Metrics() *Metrics { return d.metrics }

// Defaults returns the service's defaults: what an empty spec means on every path.
func (d *Dispatcher) Defaults() core.Options { return d.defaults }

// ParseSpec returns the options of a trigger spec on this service: core.ParseSpecWith
// from the service's defaults. Errors are *core.FieldError naming the key.
func (d *Dispatcher) ParseSpec(spec map[string]string) (core.Options, error) {
	return core.ParseSpecWith(d.defaults, spec)
}

// Run serves until ctx ends, then stops taking events (ClassShuttingDown), gives the
// events in flight StopGrace to finish, cancels what is left and returns nil once all
// have returned.
func (d *Dispatcher) Run(ctx context.Context) error {
	<-ctx.Done()
	d.mu.Lock()
	d.stopping = true
	d.mu.Unlock()
	t := time.AfterFunc(d.grace, d.stopHard)
	defer t.Stop()
	d.wg.Wait()
	d.stopHard()
	return nil
}

// Dispatch runs one event and answers it. Pushed events (gRPC, HTTP) are answered busy
// when MaxInFlight events are in flight; pulled ones (EventBus, watcher) wait for a slot
// while ctx lives. The work is bounded by the execute timeout and by the stop grace.
func (d *Dispatcher) Dispatch(ctx context.Context, req Request) Answer {
	start := time.Now()
	if req.Options.Operation == "" {
		req.Options = d.defaults // a way in without a spec of its own
	}
	a, forwarded := d.dispatch(ctx, req)
	if !forwarded { // the owner counted and logged it
		d.finish(ctx, req.Path, start, &a)
	}
	return a
}

// GaveUp counts an event that a way in stops retrying after its own limit (reason
// "max-deliver" on the EventBus, "max-retries" in the watcher; err is the last failure)
// and records a Warning Event on its ReplicaSet. ev.Cluster is the registered cluster
// ("" when the event reached none).
func (d *Dispatcher) GaveUp(path Path, ev core.Event, reason string, err error) {
	d.metrics.givenUp.WithLabelValues(ev.Cluster, string(path), reason).Inc()
	d.log.Error("giving up an event", "path", path, "reason", reason, "cluster", ev.Cluster,
		"namespace", ev.Namespace, "replicaSet", ev.Name, "err", err)
	if path == PathRevision || ev.Cluster == "" {
		return // a ConfigMap or Secret, not a ReplicaSet to tell; or the event reached no cluster
	}
	if att, aerr := d.clusters.Attacher(ev.Cluster); aerr == nil && att.CheckNamespace(ev.Namespace) == nil {
		att.GaveUp(ev, fmt.Sprintf("%s: %v", reason, err))
	}
}

// Reject answers an event refused before it could be dispatched (a payload that does
// not decode, a body too large, a bad spec; event.ErrNotAdd makes it ClassIgnored), and
// counts and logs it like any other. ev holds what was decoded, if anything.
func (d *Dispatcher) Reject(ctx context.Context, path Path, ev core.Event, err error) Answer {
	a := answer(newResponse(ev), err)
	if a.Class == ClassIgnored {
		a.Response.Ignored, a.Response.Message, a.Response.Error = err.Error(), "ignored: "+err.Error(), ""
	}
	d.finish(ctx, path, time.Now(), &a)
	return a
}

func (d *Dispatcher) dispatch(ctx context.Context, req Request) (Answer, bool) {
	resp := newResponse(req.Event)
	if r := req.Revision; r != nil {
		resp.Namespace, resp.ReplicaSet, resp.Revision = r.Namespace, "", string(r.Kind)+"/"+r.Name
	}
	name := req.Event.Cluster
	if req.Revision != nil {
		name = req.Revision.Cluster
	}
	if req.Options.Cluster != "" {
		name = req.Options.Cluster
	}
	att, err := d.clusters.Attacher(name)
	var elsewhere *OwnedElsewhereError
	if errors.As(err, &elsewhere) {
		if a, ok := d.forward(ctx, req, resp, elsewhere); ok {
			return a, true
		}
	}
	if err != nil {
		return answer(resp, err), false
	}
	return d.local(ctx, att, req, resp), false
}

// local runs an event of a cluster this replica serves.
func (d *Dispatcher) local(ctx context.Context, att *core.Attacher, req Request, resp Response) Answer {
	release, err := d.acquire(ctx, req, att.Cluster())
	if err != nil {
		return answer(resp, err)
	}
	defer release()
	ctx, cancel := d.workContext(ctx)
	defer cancel()
	if req.Revision != nil {
		return d.revision(ctx, att, req, resp)
	}
	if req.Options.Operation == core.OperationGC {
		return d.sweep(ctx, att, req, resp)
	}
	ev := req.Event
	ev.Cluster, ev.Options = att.Cluster(), req.Options
	res, err := att.Attach(ctx, ev)
	if Classify(err) == ClassPermanent {
		att.GaveUp(ev, err.Error())
	}
	resp.Result = res
	if err == nil || len(res.Objects) > 0 || res.Skipped != "" {
		resp.Message = res.Summary() // else the error says it (answer)
	}
	if res.Writes() > 0 && d.sweeps != nil {
		d.sweeps.AfterAttach(res.Cluster, res.Namespace)
	}
	return answer(resp, cause(ctx, err))
}

// revision runs a revision event: every live user of the object becomes an owner.
func (d *Dispatcher) revision(ctx context.Context, att *core.Attacher, req Request, resp Response) Answer {
	rev := *req.Revision
	rev.Cluster, rev.Options = att.Cluster(), req.Options
	res, err := att.AttachRevision(ctx, rev)
	resp.Result = res
	if err == nil || len(res.Objects) > 0 {
		resp.Message = res.Summary()
	}
	if res.Writes() > 0 && d.sweeps != nil {
		d.sweeps.AfterAttach(res.Cluster, res.Namespace)
	}
	return answer(resp, cause(ctx, err))
}

// sweep runs an `operation: gc` event: the namespace is the spec's, else the event's.
func (d *Dispatcher) sweep(ctx context.Context, att *core.Attacher, req Request, resp Response) Answer {
	ns := req.Event.Namespace
	if req.Options.Namespace != "" {
		ns = req.Options.Namespace
	}
	resp.Cluster, resp.DryRun = att.Cluster(), req.Options.DryRun
	if err := att.CheckNamespace(ns); err != nil {
		return answer(resp, err)
	}
	err := d.gc(ctx, att.Cluster(), ns, req.Options.DryRun, &resp)
	return answer(resp, cause(ctx, err))
}

// workContext bounds one event's work by the execute timeout and the stop grace.
func (d *Dispatcher) workContext(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeoutCause(ctx, d.timeout,
		fmt.Errorf("%w: the event took longer than %s", context.DeadlineExceeded, d.timeout))
	stop := context.AfterFunc(d.hard, cancel)
	return ctx, func() { stop(); cancel() }
}

// cause makes an error of work cut short by the timeout or a stop say so: the core may
// report a cut-short request as a plain transient failure.
func cause(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("%w: %w", context.Cause(ctx), err)
	}
	return err
}

// acquire takes a slot of cluster's (with MaxInFlightPerCluster), then for a replay one
// of the replay share, then a shared one: an event waiting for one of them holds none of
// the next ones.
func (d *Dispatcher) acquire(ctx context.Context, req Request, cluster string) (func(), error) {
	d.mu.Lock()
	if d.stopping {
		d.mu.Unlock()
		return nil, fmt.Errorf("%w; retry", ErrShuttingDown)
	}
	d.wg.Add(1)
	d.mu.Unlock()
	var held []chan struct{}
	release := func() {
		for i := len(held) - 1; i >= 0; i-- {
			<-held[i]
		}
	}
	take := func(wait bool, sem chan struct{}, limit string) error {
		if err := d.slot(ctx, wait, sem, limit); err != nil {
			release()
			d.wg.Done()
			return err
		}
		held = append(held, sem)
		return nil
	}
	// An EventBus message waiting for its cluster's slot would hold one of the
	// subscriber's handlers, which every cluster shares: it is answered busy at once
	// (Nak, redelivered later), so a stalled cluster cannot take them all.
	if own := d.clusterSlots(cluster); own != nil {
		if err := take(req.Path.pull() && req.Path != PathEventBus, own, fmt.Sprintf("limit %d for cluster %q", cap(own), cluster)); err != nil {
			return nil, err
		}
	}
	if req.Replay && req.Path.pull() {
		if err := take(true, d.replay, fmt.Sprintf("replay share %d", cap(d.replay))); err != nil {
			return nil, err
		}
	}
	if err := take(req.Path.pull(), d.sem, fmt.Sprintf("limit %d", cap(d.sem))); err != nil {
		return nil, err
	}
	d.metrics.inFlight.Inc()
	return func() {
		d.metrics.inFlight.Dec()
		release()
		d.wg.Done()
	}, nil
}

// clusterSlots returns cluster's slots, or nil without MaxInFlightPerCluster.
func (d *Dispatcher) clusterSlots(cluster string) chan struct{} {
	if d.perCluster <= 0 {
		return nil
	}
	if c, ok := d.bySem.Load(cluster); ok {
		return c.(chan struct{})
	}
	c, _ := d.bySem.LoadOrStore(cluster, make(chan struct{}, d.perCluster))
	return c.(chan struct{})
}

// slot takes one of sem's slots: at once or ErrBusy, or with wait (a pulled event)
// waiting while ctx lives.
func (d *Dispatcher) slot(ctx context.Context, wait bool, sem chan struct{}, limit string) error {
	select {
	case sem <- struct{}{}:
		return nil
	default:
	}
	if !wait {
		return fmt.Errorf("%w (%s); retry later", ErrBusy, limit)
	}
	select {
	case sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for a free slot: %w", context.Cause(ctx))
	case <-d.hard.Done():
		return fmt.Errorf("%w; retry", ErrShuttingDown)
	}
}

func newResponse(ev core.Event) Response {
	return Response{Result: core.Result{Namespace: ev.Namespace, ReplicaSet: ev.Name, Objects: []core.ObjectResult{}}}
}

func answer(resp Response, err error) Answer {
	a := Answer{Class: Classify(err), Err: err, Response: resp, Event: eventOf(resp)}
	if err != nil {
		a.Response.Error = err.Error()
		if a.Response.Message == "" {
			a.Response.Message = err.Error()
		}
	}
	return a
}

// finish counts and logs one answered event: one line, at a level by class.
func (d *Dispatcher) finish(ctx context.Context, path Path, start time.Time, a *Answer) {
	d.metrics.observe(path, start, a)
	r := &a.Response
	// The names are the sender's, unchecked until the Attacher validates them (clipName).
	attrs := []any{"path", path, "result", a.Class, "cluster", clipName(r.Cluster), "namespace", clipName(r.Namespace)}
	if r.Revision != "" {
		attrs = append(attrs, "revision", clipName(r.Revision))
	} else {
		attrs = append(attrs, "replicaSet", clipName(r.ReplicaSet))
	}
	attrs = append(attrs, "message", r.Message, "duration", time.Since(start).Round(time.Microsecond))
	if a.Err != nil && a.Class != ClassIgnored {
		attrs = append(attrs, "err", a.Err)
	}
	d.log.Log(ctx, level(a), "event", attrs...)
	if d.observe != nil {
		d.observe(*a)
	}
}

// clipName shortens a name an event carries before it is logged: the sender's, unchecked
// until the Attacher validates it, so a sender could make one event log megabytes. Any
// valid name (253 bytes at most, with its kind) is kept whole.
func clipName(s string) string { return core.ClipTo(s, 320) }

func level(a *Answer) slog.Level {
	switch a.Class {
	case ClassOK:
		if a.Response.Writes() > 0 {
			return slog.LevelInfo
		}
		return slog.LevelDebug
	case ClassIgnored:
		return slog.LevelDebug
	case ClassRefused:
		return slog.LevelInfo
	case ClassPermanent:
		return slog.LevelError
	}
	return slog.LevelWarn
}
