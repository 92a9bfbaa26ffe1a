package sensor

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

	"github.com/configmap-attacher/configmap-attacher/eventsource"
	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/eventbus"
)

// Argo Events EventBus layout (github.com/argoproj/argo-events pkg/eventbus/jetstream):
// one stream named "default", subjects "default.<eventSourceName>.<eventName>", the
// message body a structured-mode CloudEvent JSON, Nats-Msg-Id the CloudEvent id.
const (
	DefaultStream  = "default"
	SubjectPrefix  = "default."
	DefaultDurable = "configmap-attacher"
)

// Clusters routes an event to the Attacher of its cluster; the empty name is the default
// cluster and an unknown one is a core.ErrInvalid.
type Clusters interface {
	Attacher(name string) (*core.Attacher, error)
}

// Auth and TLS configure the EventBus connection (see package eventbus).
type (
	Auth = eventbus.Auth
	TLS  = eventbus.TLS
)

// Options configures a Subscriber.
type Options struct {
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
	// Spec is the trigger spec applied to every event (DESIGN.md keys); nil means defaults.
	Spec map[string]string
	// MaxInFlight bounds the messages being handled at once; default 16.
	MaxInFlight int
	// AckWait is how long JetStream waits for an ack before redelivering; default 30 s.
	// Long work sends in-progress heartbeats every AckWait/3.
	AckWait time.Duration
	// NakDelay is the first redelivery delay after a transient failure, doubled per
	// delivery up to MaxNakDelay; defaults 1 s and 1 min.
	NakDelay, MaxNakDelay time.Duration
	// HandleTimeout bounds the work on one message; default 2 min.
	HandleTimeout time.Duration
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
	// Observe, when set, is told the result of every message that was not ignored (res
	// is nil when nothing was resolved, e.g. bad input), for metrics.
	Observe func(res *core.Result, err error)
}

func (o *Options) defaults() error {
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
		o.MaxInFlight = 16
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
	if o.HandleTimeout <= 0 {
		o.HandleTimeout = 2 * time.Minute
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
func (o Options) Subject() string {
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
	opts     Options
	clusters Clusters
	spec     core.Options
	log      *slog.Logger
	metrics  *metrics
	ready    chan struct{}
	once     sync.Once
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
		return false, "EventBus: connecting to " + eventbus.RedactURL(s.opts.URL)
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

// NewSubscriber validates opts and returns a Subscriber; it connects in Run. Errors are
// core.ErrInvalid naming the bad option.
func NewSubscriber(opts Options, clusters Clusters) (*Subscriber, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	if clusters == nil {
		return nil, errors.New("sensor: nil Clusters")
	}
	spec, err := core.ParseSpec(opts.Spec)
	if err != nil {
		return nil, fmt.Errorf("eventbus spec: %w", err)
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	return &Subscriber{opts: opts, clusters: clusters, spec: spec, log: opts.Logger.With("component", "eventbus"), metrics: m, ready: make(chan struct{})}, nil
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
	cfg := jetstream.ConsumerConfig{
		Durable:       s.opts.Durable,
		Description:   "configmap-attacher: ReplicaSet events from the Argo Events EventBus",
		FilterSubject: s.opts.Subject(),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       s.opts.AckWait,
		MaxAckPending: 4 * s.opts.MaxInFlight,
		DeliverPolicy: jetstream.DeliverNewPolicy,
		MaxDeliver:    -1,
	}
	if s.opts.DeliverAll {
		cfg.DeliverPolicy = jetstream.DeliverAllPolicy
	}
	cons, err := bindConsumer(ctx, stream, cfg)
	if err != nil {
		return fmt.Errorf("binding durable consumer %q on stream %q: %w", s.opts.Durable, s.opts.Stream, err)
	}
	pullFrom := func(c jetstream.Consumer) (jetstream.MessagesContext, error) {
		return c.Messages(jetstream.PullMaxMessages(s.opts.MaxInFlight))
	}
	first, err := pullFrom(cons)
	if err != nil {
		return fmt.Errorf("pulling from consumer %q: %w", s.opts.Durable, err)
	}
	s.bound.Store(true)
	s.log.Info("subscribed to the EventBus", "url", eventbus.RedactURL(s.opts.URL), "stream", s.opts.Stream,
		"consumer", s.opts.Durable, "subject", s.opts.Subject())
	s.once.Do(func() { close(s.ready) })

	// The iterator (and the consumer behind it) is replaced when the watchdog finds the
	// pull stalled or the consumer gone, or when the iterator ends by itself (the
	// consumer was deleted); only a stop (ctx done) ends the loop.
	var (
		mu       sync.Mutex
		iter     = first
		current  = cons
		stopping bool
		received atomic.Int64 // when the last message arrived (or Run began)
	)
	received.Store(time.Now().UnixNano())
	go func() {
		<-ctx.Done()
		mu.Lock()
		stopping = true
		iter.Stop() // stop pulling; Next returns ErrMsgIteratorClosed
		mu.Unlock()
	}()
	sem := make(chan struct{}, s.opts.MaxInFlight)
	consumer := func() jetstream.Consumer {
		mu.Lock()
		defer mu.Unlock()
		return current
	}
	go s.watchdog(ctx, consumer, sem, &received, func() {
		mu.Lock()
		defer mu.Unlock()
		if !stopping {
			iter.Stop()
		}
	})
	// repull re-binds the consumer (re-creating it if it was deleted) and pulls again,
	// retrying every second until it works or ctx ends (then it returns false).
	repull := func() bool {
		for {
			// A consumer re-created after a deletion starts just before the last message
			// received, not at "new" messages: nothing published meanwhile is skipped
			// (what is delivered again is handled idempotently).
			rcfg := cfg
			if rcfg.DeliverPolicy == jetstream.DeliverNewPolicy {
				start := time.Unix(0, received.Load()).Add(-time.Second)
				rcfg.DeliverPolicy, rcfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &start
			}
			c, err := bindConsumer(ctx, stream, rcfg)
			var next jetstream.MessagesContext
			if err == nil {
				next, err = pullFrom(c)
			}
			if err == nil {
				mu.Lock()
				defer mu.Unlock()
				if stopping {
					next.Stop()
					return false
				}
				iter, current = next, c
				s.bound.Store(true)
				return true
			}
			s.bound.Store(false)
			s.log.Warn("re-binding the EventBus consumer", "consumer", s.opts.Durable, "err", err)
			select {
			case <-ctx.Done():
				return false
			case <-time.After(time.Second):
			}
		}
	}
	var wg sync.WaitGroup
	// Work runs on its own context: a shutdown lets in-flight messages finish and ack.
	work := context.WithoutCancel(ctx)
	for {
		mu.Lock()
		it := iter
		mu.Unlock()
		msg, err := it.Next()
		if err != nil {
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				mu.Lock()
				stop := stopping
				mu.Unlock()
				if stop || !repull() {
					break
				}
				continue
			}
			if errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrConsumerNotFound) {
				s.bound.Store(false)
				s.log.Warn("EventBus consumer deleted: re-creating it", "consumer", s.opts.Durable)
				it.Stop() // the next round re-binds (repull)
				continue
			}
			s.log.Warn("pulling from the EventBus", "err", err)
			continue
		}
		received.Store(time.Now().UnixNano())
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			s.handle(work, msg)
		}()
	}
	wg.Wait()
	s.log.Info("EventBus subscription drained")
	return nil
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
	return cons, err
}

// watchdog checks every StallTimeout/4 whether the pull is stalled (see stalled) and
// then calls restart, which makes Run re-create the pull iterator. received is when the
// last message arrived; idle time counts from it or from the watchdog's last restart.
func (s *Subscriber) watchdog(ctx context.Context, consumer func() jetstream.Consumer, sem chan struct{}, received *atomic.Int64, restart func()) {
	t := time.NewTicker(s.opts.StallTimeout / 4)
	defer t.Stop()
	var restarted time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		idle := time.Since(time.Unix(0, max(received.Load(), restarted.UnixNano())))
		if idle < s.opts.StallTimeout {
			continue
		}
		ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
		info, err := consumer().Info(ictx)
		cancel()
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			// Deleted (e.g. the stream was re-created): re-bind, which re-creates it.
			s.bound.Store(false)
			s.log.Warn("EventBus consumer gone: re-creating it", "consumer", s.opts.Durable)
			restarted = time.Now()
			restart()
			continue
		}
		if err != nil {
			continue // disconnected: the client reconnects; Health reports it
		}
		if stalled(idle, s.opts.StallTimeout, info.NumPending, info.NumAckPending, info.Config.MaxAckPending, len(sem), cap(sem)) {
			s.log.Warn("EventBus pull stalled: re-creating it", "pending", info.NumPending, "idle", idle.Round(time.Second))
			restarted = time.Now()
			restart()
		}
	}
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
		nc, err := eventbus.Connect(eventbus.Conn{URL: s.opts.URL, Auth: s.opts.Auth, TLS: s.opts.TLS, Name: "configmap-attacher"}, s.log)
		if err == nil {
			s.conn.Store(nc)
			return nc, nil
		}
		if !errors.Is(err, eventbus.ErrUnreachable) {
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
	ctx, cancel := context.WithTimeout(ctx, s.opts.HandleTimeout)
	defer cancel()
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
	res, err := s.process(ctx, msg.Data())
	log := s.log.With("subject", msg.Subject())
	if res != nil {
		log = log.With("namespace", res.Namespace, "replicaSet", res.ReplicaSet)
	}
	outcome := Classify(err)
	if s.opts.Observe != nil && outcome != OutcomeIgnore {
		s.opts.Observe(res, err)
	}
	switch outcome {
	case OutcomeAck:
		// The ack's confirmation is awaited for at most AckConfirmTimeout: when the
		// connection drops mid-ack the reply never comes, and waiting for it would hold
		// this in-flight slot for the whole HandleTimeout (the stall seen after a NATS
		// restart). An unconfirmed ack is at worst a redelivery, handled idempotently.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), AckConfirmTimeout)
		err := msg.DoubleAck(actx)
		cancel()
		if err != nil {
			log.Warn("ack failed; the message will be redelivered (handling is idempotent)", "err", err)
		}
		if res != nil {
			log.Debug("handled", "summary", res.Summary(), "duration", time.Since(start))
		}
	case OutcomeIgnore:
		_ = msg.Ack()
		log.Debug("ignored", "reason", err)
	case OutcomeTerm:
		_ = msg.TermWithReason(err.Error())
		log.Warn("terminated a message that can never succeed", "err", err)
	case OutcomeNak:
		delay := s.nakDelay(msg)
		_ = msg.NakWithDelay(delay)
		log.Warn("transient failure; redelivering later", "err", err, "delay", delay)
	}
	s.metrics.messages.WithLabelValues(string(Classify(err))).Inc()
	s.metrics.duration.Observe(time.Since(start).Seconds())
}

func (s *Subscriber) nakDelay(msg jetstream.Msg) time.Duration {
	d := s.opts.NakDelay
	if md, err := msg.Metadata(); err == nil {
		for i := uint64(1); i < md.NumDelivered && d < s.opts.MaxNakDelay; i++ {
			d *= 2
		}
	}
	return min(d, s.opts.MaxNakDelay)
}

// process decodes one EventBus message and runs the core for it.
func (s *Subscriber) process(ctx context.Context, data []byte) (*core.Result, error) {
	dec, err := eventsource.Decode(data)
	if err != nil {
		return nil, err
	}
	ev := dec.Event
	ev.Options = s.spec
	ev.Cluster = dec.Cluster(s.spec.Cluster)
	att, err := s.clusters.Attacher(ev.Cluster)
	if err != nil {
		return nil, err
	}
	if s.spec.Operation != core.OperationAttach {
		return nil, core.Invalidf("operation", "the EventBus subscription only attaches")
	}
	res, err := att.Attach(ctx, ev)
	return &res, err
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

// Classify maps a handling error to the JetStream answer (DESIGN.md safety rule 8): nil
// → Ack; not a ReplicaSet ADD → Ack and ignore; bad input or a refusal → Term (a retry
// cannot help); anything else (cluster unavailable, timeout) → Nak with delay.
func Classify(err error) Outcome {
	switch {
	case err == nil:
		return OutcomeAck
	case errors.Is(err, eventsource.ErrNotAdd):
		return OutcomeIgnore
	case errors.Is(err, core.ErrInvalid), errors.Is(err, core.ErrRefused):
		return OutcomeTerm
	}
	return OutcomeNak
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
