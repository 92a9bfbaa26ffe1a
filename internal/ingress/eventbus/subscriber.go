package eventbus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
	"github.com/configmap-attacher/configmap-attacher/internal/event"
)

// Argo Events EventBus layout (github.com/argoproj/argo-events pkg/eventbus/jetstream):
// one stream named "default", subjects "default.<eventSourceName>.<eventName>", the
// message body a structured-mode CloudEvent JSON, Nats-Msg-Id the CloudEvent id.
const (
	DefaultStream  = "default"
	SubjectPrefix  = "default."
	DefaultDurable = "configmap-attacher"
)

// Dispatcher is what the subscription feeds: *dispatch.Dispatcher satisfies it.
type Dispatcher interface {
	Dispatch(ctx context.Context, req dispatch.Request) dispatch.Answer
	Reject(ctx context.Context, path dispatch.Path, ev core.Event, err error) dispatch.Answer
	GaveUp(path dispatch.Path, ev core.Event, reason string, err error)
}

// DefaultMaxDeliver bounds the deliveries of one message (SubscriberOptions.MaxDeliver).
// With the Nak delays doubling from 1 s to 1 min it covers about 45 minutes of a
// cluster being unavailable; what is given up after is counted, and repaired by the
// level-triggered paths (docs/design.md, "Nothing lost").
const DefaultMaxDeliver = 50

// SubscriberOptions configures a Subscriber.
type SubscriberOptions struct {
	// URL of the NATS server(s), comma separated (nats://host:4222).
	URL  string
	Auth Auth
	TLS  TLS
	// Stream is the EventBus stream; default "default".
	Stream string
	// Durable is the durable consumer name shared by every replica; default
	// "configmap-attacher". Replicas with the same name split the messages.
	Durable string
	// EventSourceName and EventName filter the subjects; empty means any.
	EventSourceName, EventName string
	// Options are the effective options of every event (the dispatcher's ParseSpec of
	// the service's spec); nil means core.DefaultOptions.
	Options *core.Options
	// MaxInFlight bounds the messages being handled at once; default DefaultMaxInFlight.
	MaxInFlight int
	// MaxAckPending is the consumer's window of delivered, unanswered messages: those in
	// flight, those pulled and waiting for a handler, and those Nak'd with a delay (a
	// cluster answering retry-later), which JetStream keeps in the window until their
	// redelivery. While fewer than MaxAckPending - 2 x MaxInFlight wait out a delay, the
	// other clusters' messages keep being delivered (docs/design.md, "EventBus
	// isolation"); default the larger of DefaultMaxAckPending and 4 x MaxInFlight.
	MaxAckPending int
	// AckWait is how long JetStream waits for an ack before redelivering; default 30 s.
	// Long work sends in-progress heartbeats every AckWait/3.
	AckWait time.Duration
	// NakDelay is the first redelivery delay after a transient failure, doubled per
	// delivery up to MaxNakDelay; defaults 1 s and 1 min.
	NakDelay, MaxNakDelay time.Duration
	// MaxDeliver bounds the deliveries of one message: a transient failure on the last
	// one is terminated and counted as given up; default DefaultMaxDeliver.
	MaxDeliver int
	// StallTimeout: when no message has arrived for this long although the consumer has
	// undelivered messages and the subscriber has room, the pull is re-created (a guard
	// against pull requests lost across a server restart, a known failure class of NATS
	// pull consumers); default 1 min.
	StallTimeout time.Duration
	// DeliverAll makes a newly created consumer start at the beginning of the stream
	// instead of with new messages (an existing durable keeps its position).
	DeliverAll bool
	// CreateStream creates the stream if it is missing (development only: in a cluster
	// the Argo Events EventBus owns the stream).
	CreateStream bool
	Logger       *slog.Logger
	// Registerer receives the metrics; nil means prometheus.DefaultRegisterer.
	Registerer prometheus.Registerer
}

// DefaultMaxInFlight is SubscriberOptions.MaxInFlight's default: as many as the
// watcher's workers (watch.DefaultWorkers), for the same reason: in a burst an attach's
// GET and PATCH share the apiserver with the creates, and fewer in flight fall behind.
const DefaultMaxInFlight = 48

// DefaultMaxAckPending is SubscriberOptions.MaxAckPending's default (at least 4 x
// MaxInFlight): JetStream's own default for a consumer with explicit acks. A cluster that
// hangs or is down parks its messages in this window, Nak'd with a delay, so the window
// is sized for a backlog of such messages, not for the messages in flight.
const DefaultMaxAckPending = 1000

func (o *SubscriberOptions) defaults() error {
	if o.URL == "" {
		return core.Invalidf("eventbus-url", "the NATS URL is required")
	}
	if o.Stream == "" {
		o.Stream = DefaultStream
	}
	if o.Durable == "" {
		o.Durable = DefaultDurable
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = DefaultMaxInFlight
	}
	if o.MaxAckPending <= 0 {
		o.MaxAckPending = max(DefaultMaxAckPending, 4*o.MaxInFlight)
	}
	if o.AckWait <= 0 {
		o.AckWait = 30 * time.Second
	}
	if o.NakDelay <= 0 {
		o.NakDelay = time.Second
	}
	if o.MaxNakDelay <= 0 {
		o.MaxNakDelay = time.Minute
	}
	if o.MaxDeliver <= 0 {
		o.MaxDeliver = DefaultMaxDeliver
	}
	if o.StallTimeout <= 0 {
		o.StallTimeout = time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Auth.Token != "" && (o.Auth.User != "" || o.Auth.Password != "") {
		return core.Invalidf("eventbus-auth", "use a token or a user and password, not both")
	}
	for _, part := range []struct{ field, v string }{{"eventbus-event-source", o.EventSourceName}, {"eventbus-event-name", o.EventName}} {
		if strings.ContainsAny(part.v, ".*> \t") {
			return core.Invalidf(part.field, "%q may not contain '.', '*', '>' or spaces", part.v)
		}
	}
	return nil
}

// Subject returns the subject filter: default.<eventSourceName>.<eventName>, with "*"
// for an empty part.
func (o SubscriberOptions) Subject() string {
	es, ev := o.EventSourceName, o.EventName
	if es == "" {
		es = "*"
	}
	if ev == "" {
		ev = "*"
	}
	return SubjectPrefix + es + "." + ev
}

// AckConfirmTimeout bounds the wait for JetStream's confirmation of an ack (normally
// milliseconds).
const AckConfirmTimeout = 5 * time.Second

// Subscriber consumes ReplicaSet events from the EventBus with at-least-once delivery:
// a message is acked only after the core succeeded; a transient failure is Nak'ed with
// a growing delay; bad input is terminated (Term), counted and logged; events that are
// not ReplicaSet ADDs are acked and ignored.
type Subscriber struct {
	opts    SubscriberOptions
	d       Dispatcher
	spec    core.Options
	log     *slog.Logger
	metrics *metrics
	ready   chan struct{}
	once    sync.Once
	// conn is the current EventBus connection (nil before the first connect).
	conn atomic.Pointer[nats.Conn]
	// bound: the durable consumer exists and is being pulled from.
	bound atomic.Bool
}

// Health reports whether the subscription is working: connected to the EventBus and the
// durable consumer bound. detail says why not ("EventBus: not connected (RECONNECTING)").
// While the connection is down messages stay in the stream and are delivered after the
// reconnect.
func (s *Subscriber) Health() (ok bool, detail string) {
	nc := s.conn.Load()
	switch {
	case nc == nil:
		return false, "EventBus: connecting to " + RedactURL(s.opts.URL)
	case !nc.IsConnected():
		return false, fmt.Sprintf("EventBus: not connected (%s)", nc.Status())
	}
	select {
	case <-s.ready:
	default:
		return false, "EventBus: binding the durable consumer"
	}
	if !s.bound.Load() {
		return false, "EventBus: re-binding the durable consumer " + s.opts.Durable
	}
	return true, "EventBus: subscribed"
}

// NewSubscriber validates opts and returns a Subscriber feeding d; it connects in Run.
// Errors are core.ErrInvalid naming the bad option.
func NewSubscriber(opts SubscriberOptions, d Dispatcher) (*Subscriber, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	if d == nil {
		return nil, errors.New("eventbus: nil Dispatcher")
	}
	spec := core.DefaultOptions()
	if opts.Options != nil {
		spec = *opts.Options
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	return &Subscriber{opts: opts, d: d, spec: spec, log: opts.Logger.With("component", "eventbus"), metrics: m, ready: make(chan struct{})}, nil
}

// Ready is closed once the consumer exists and messages are being pulled.
func (s *Subscriber) Ready() <-chan struct{} { return s.ready }

// Run connects, binds the durable consumer and handles messages until ctx ends, then
// stops pulling, finishes the messages in flight and closes the connection. An EventBus
// that cannot be reached yet is retried (Health reports it) until ctx ends; once
// connected, the client reconnects by itself. It returns nil on a clean shutdown and an
// error if the connection is refused (authentication, TLS) or the consumer cannot be set
// up.
func (s *Subscriber) Run(ctx context.Context) error {
	nc, err := s.connect(ctx)
	if err != nil || nc == nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	stream, err := s.stream(ctx, js)
	if err != nil {
		return err
	}
	p := newPuller(s, stream, s.consumerConfig())
	if err := p.start(ctx); err != nil {
		return err
	}
	s.bound.Store(true)
	s.log.Info("subscribed to the EventBus", "url", RedactURL(s.opts.URL), "stream", s.opts.Stream,
		"consumer", s.opts.Durable, "subject", s.opts.Subject())
	s.once.Do(func() { close(s.ready) })
	p.run(ctx)
	s.log.Info("EventBus subscription drained")
	return nil
}

// consumerConfig is the durable consumer's configuration.
func (s *Subscriber) consumerConfig() jetstream.ConsumerConfig {
	cfg := jetstream.ConsumerConfig{
		Durable:       s.opts.Durable,
		Description:   "configmap-attacher: ReplicaSet events from the Argo Events EventBus",
		FilterSubject: s.opts.Subject(),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       s.opts.AckWait,
		MaxAckPending: s.opts.MaxAckPending,
		DeliverPolicy: jetstream.DeliverNewPolicy,
		// One more than MaxDeliver: the handler itself terminates and counts the
		// MaxDeliver-th delivery, so the server's limit never drops a message uncounted.
		MaxDeliver: s.opts.MaxDeliver + 1,
	}
	if s.opts.DeliverAll {
		cfg.DeliverPolicy = jetstream.DeliverAllPolicy
	}
	return cfg
}

// bindConsumer returns the durable consumer cfg.Durable of stream, creating it with cfg
// when it does not exist (first start, or deleted meanwhile); another replica creating
// it at the same moment is fine.
func bindConsumer(ctx context.Context, stream jetstream.Stream, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	cons, err := stream.Consumer(ctx, cfg.Durable)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		cons, err = stream.CreateConsumer(ctx, cfg)
		if errors.Is(err, jetstream.ErrConsumerExists) { // another replica won the race
			cons, err = stream.Consumer(ctx, cfg.Durable)
		}
	}
	if err != nil {
		return nil, err
	}
	return updateConsumer(ctx, stream, cons, cfg)
}

// updateConsumer brings an existing durable consumer's updatable limits (MaxDeliver,
// AckWait, MaxAckPending) to cfg's, so that a changed flag takes effect on a consumer
// created by an earlier version or configuration; where it keeps its position is never
// changed.
func updateConsumer(ctx context.Context, stream jetstream.Stream, cons jetstream.Consumer, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	have := cons.CachedInfo().Config
	if have.MaxDeliver == cfg.MaxDeliver && have.AckWait == cfg.AckWait && have.MaxAckPending == cfg.MaxAckPending {
		return cons, nil
	}
	want := have
	want.MaxDeliver, want.AckWait, want.MaxAckPending = cfg.MaxDeliver, cfg.AckWait, cfg.MaxAckPending
	updated, err := stream.UpdateConsumer(ctx, want)
	if err != nil {
		return nil, fmt.Errorf("updating the limits of consumer %q: %w", cfg.Durable, err)
	}
	return updated, nil
}

// stalled reports whether a pull consumer looks stuck: nothing received for at least
// timeout although the consumer has undelivered messages (pending), the server may
// deliver more (ackPending below maxAckPending; 0 or less means no limit) and the
// subscriber has room (inFlight below capacity).
func stalled(idle, timeout time.Duration, pending uint64, ackPending, maxAckPending, inFlight, capacity int) bool {
	return idle >= timeout && pending > 0 && (maxAckPending <= 0 || ackPending < maxAckPending) && inFlight < capacity
}

// connect dials the EventBus, retrying while it cannot be reached (not up yet,
// restarting, its Service name not resolving yet, timeouts: eventbus.ErrUnreachable)
// with a delay growing to 10 s. It returns nil, nil when ctx ends first, and a refusal
// (authentication, authorization, TLS: eventbus.Refused) at once.
func (s *Subscriber) connect(ctx context.Context) (*nats.Conn, error) {
	delay := 500 * time.Millisecond
	for {
		nc, err := Connect(Conn{URL: s.opts.URL, Auth: s.opts.Auth, TLS: s.opts.TLS, Name: "configmap-attacher"}, s.log)
		if err == nil {
			s.conn.Store(nc)
			return nc, nil
		}
		if !errors.Is(err, ErrUnreachable) {
			return nil, err
		}
		s.log.Warn("EventBus not reachable; retrying", "err", err, "retryIn", delay)
		select {
		case <-ctx.Done():
			return nil, nil
		case <-time.After(delay):
		}
		delay = min(2*delay, 10*time.Second)
	}
}

func (s *Subscriber) stream(ctx context.Context, js jetstream.JetStream) (jetstream.Stream, error) {
	st, err := js.Stream(ctx, s.opts.Stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) && s.opts.CreateStream {
		st, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: s.opts.Stream, Subjects: []string{SubjectPrefix + ">"},
			MaxAge: 168 * time.Hour, Duplicates: 5 * time.Minute})
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			st, err = js.Stream(ctx, s.opts.Stream)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("EventBus stream %q: %w", s.opts.Stream, err)
	}
	return st, nil
}

// handle processes one message and answers JetStream exactly once.
func (s *Subscriber) handle(ctx context.Context, msg jetstream.Msg) {
	// Heartbeats keep a slow message from being redelivered to another replica.
	stopBeat := make(chan struct{})
	defer close(stopBeat)
	go func() {
		t := time.NewTicker(s.opts.AckWait / 3)
		defer t.Stop()
		for {
			select {
			case <-stopBeat:
				return
			case <-t.C:
				_ = msg.InProgress()
			}
		}
	}()
	start := time.Now()
	a := s.process(ctx, msg.Data())
	outcome := s.answer(ctx, msg, a)
	s.metrics.messages.WithLabelValues(string(outcome)).Inc()
	s.metrics.duration.Observe(time.Since(start).Seconds())
}

// process decodes one EventBus message and dispatches it.
func (s *Subscriber) process(ctx context.Context, data []byte) dispatch.Answer {
	dec, err := event.Decode(data)
	if err != nil {
		return s.d.Reject(ctx, dispatch.PathEventBus, dec.Event, err)
	}
	return s.d.Dispatch(ctx, dispatch.Request{Path: dispatch.PathEventBus, Options: s.spec, Event: dec.CoreEvent()})
}

// answer answers JetStream for a (safety rule 8) and returns what it answered (decide).
func (s *Subscriber) answer(ctx context.Context, msg jetstream.Msg, a dispatch.Answer) Outcome {
	d := s.decide(a, msg.Metadata)
	if d.giveUp {
		s.d.GaveUp(dispatch.PathEventBus, a.Event, "max-deliver", fmt.Errorf("%d deliveries: %w", d.delivered, a.Err))
	}
	switch d.outcome {
	case OutcomeAck:
		// The ack's confirmation is awaited for at most AckConfirmTimeout: when the
		// connection drops mid-ack the reply never comes, and waiting for it would hold
		// this in-flight slot (the stall seen after a NATS restart). An unconfirmed ack is
		// at worst a redelivery, handled idempotently.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), AckConfirmTimeout)
		if err := msg.DoubleAck(actx); err != nil {
			s.log.Warn("ack failed; the message will be redelivered (handling is idempotent)", "subject", msg.Subject(), "err", err)
		}
		cancel()
	case OutcomeIgnore:
		_ = msg.Ack()
	case OutcomeTerm:
		_ = msg.TermWithReason(a.Err.Error())
	case OutcomeNak:
		_ = msg.NakWithDelay(d.delay)
	}
	return d.outcome
}

// decision is how one answer is answered to JetStream.
type decision struct {
	outcome Outcome
	// delay is a Nak's redelivery delay.
	delay time.Duration
	// giveUp: a retryable answer on the last delivery, terminated and counted as given
	// up (Dispatcher.GaveUp); delivered is the delivery count it ends on.
	giveUp    bool
	delivered uint64
}

// decide maps a to its JetStream answer: done or ignored → Ack; bad input, a refusal or
// a permanent failure → Term (a retry cannot help); a retryable class → Nak with a
// delay doubling per delivery (nakDelay), which keeps the message for a redelivery
// (docs/design.md, "EventBus isolation"), or Term and given up on the MaxDeliver-th
// delivery. metadata (the message's delivery count) is read only for a retryable class.
func (s *Subscriber) decide(a dispatch.Answer, metadata func() (*jetstream.MsgMetadata, error)) decision {
	d := decision{outcome: Classify(a.Class)}
	if d.outcome != OutcomeNak {
		return d
	}
	md, err := metadata()
	// A stop on the last delivery is not a reason to give up: the consumer allows one
	// delivery more than MaxDeliver (see consumerConfig), which a stopping replica leaves
	// to the next.
	last := uint64(s.opts.MaxDeliver)
	if a.Class == dispatch.ClassShuttingDown || a.Class == dispatch.ClassCanceled {
		last++
	}
	if err == nil && md.NumDelivered >= last {
		d.outcome, d.giveUp, d.delivered = OutcomeTerm, true, md.NumDelivered
	}
	d.delay = s.nakDelay(md, err)
	return d
}

// nakDelay is the redelivery delay of a retryable answer: NakDelay doubled per earlier
// delivery, at most MaxNakDelay (NakDelay when the delivery count is unknown).
func (s *Subscriber) nakDelay(md *jetstream.MsgMetadata, err error) time.Duration {
	d := s.opts.NakDelay
	if err == nil {
		for i := uint64(1); i < md.NumDelivered && d < s.opts.MaxNakDelay; i++ {
			d *= 2
		}
	}
	return min(d, s.opts.MaxNakDelay)
}

// Outcome is how a message is answered.
type Outcome string

// JetStream answers.
const (
	OutcomeAck    Outcome = "ack"
	OutcomeIgnore Outcome = "ignored"
	OutcomeTerm   Outcome = "term"
	OutcomeNak    Outcome = "nak"
)

// Classify maps an answer class to the JetStream answer: ok → Ack; ignored → Ack;
// retryable (unavailable, timeout, busy, shutting down) → Nak with delay; anything else
// (invalid, refused, permanent, unsupported) → Term.
func Classify(c dispatch.Class) Outcome {
	switch {
	case c == dispatch.ClassOK:
		return OutcomeAck
	case c == dispatch.ClassIgnored:
		return OutcomeIgnore
	case c.Retryable():
		return OutcomeNak
	}
	return OutcomeTerm
}

type metrics struct {
	messages *prometheus.CounterVec
	duration prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	if reg == nil {
		reg = prometheus.DefaultRegisterer
	}
	m := &metrics{
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "configmap_attacher_eventbus_messages_total",
			Help: "EventBus messages handled, by answer (ack, ignored, term, nak)."}, []string{"result"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "configmap_attacher_eventbus_handle_seconds",
			Help: "Time to handle one EventBus message, in seconds.", Buckets: prometheus.DefBuckets}),
	}
	var err error
	if m.messages, err = register(reg, m.messages); err != nil {
		return nil, err
	}
	if m.duration, err = register(reg, m.duration); err != nil {
		return nil, err
	}
	return m, nil
}

// register registers c, or returns the collector already registered under its name
// (several subscribers in one process share the metrics).
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, err
	}
	return c, nil
}
