package eventbus

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// puller is the pull loop of one Run: it takes the durable consumer's messages from a
// pull iterator and hands each to a handler, at most MaxInFlight at once. The iterator
// (and the consumer behind it) is replaced when it ends by itself (the consumer was
// deleted) or when the watchdog finds the pull stalled or the consumer gone; only a stop
// (Run's context done) ends the loop (docs/design.md, "EventBus isolation").
type puller struct {
	s   *Subscriber
	cfg jetstream.ConsumerConfig
	// open binds the durable consumer with cfg and pulls from it (bindConsumer and
	// Consumer.Messages); handle answers one message (Subscriber.handle). Unit tests
	// replace both.
	open   func(ctx context.Context, cfg jetstream.ConsumerConfig) (jetstream.Consumer, jetstream.MessagesContext, error)
	handle func(ctx context.Context, msg jetstream.Msg)
	// rebindDelay is the pause between failed re-binds.
	rebindDelay time.Duration
	sem         chan struct{}
	wg          sync.WaitGroup
	// received is when the last message arrived (or the loop began), Unix nanoseconds;
	// restarted is when the watchdog last re-created the pull (the watchdog's own).
	received  atomic.Int64
	restarted int64

	mu       sync.Mutex // guards iter, current and stopping
	iter     jetstream.MessagesContext
	current  jetstream.Consumer
	stopping bool
}

func newPuller(s *Subscriber, stream jetstream.Stream, cfg jetstream.ConsumerConfig) *puller {
	p := &puller{s: s, cfg: cfg, handle: s.handle, rebindDelay: time.Second, sem: make(chan struct{}, s.opts.MaxInFlight)}
	p.open = func(ctx context.Context, cfg jetstream.ConsumerConfig) (jetstream.Consumer, jetstream.MessagesContext, error) {
		c, err := bindConsumer(ctx, stream, cfg)
		if err != nil {
			return nil, nil, fmt.Errorf("binding durable consumer %q on stream %q: %w", cfg.Durable, s.opts.Stream, err)
		}
		it, err := c.Messages(jetstream.PullMaxMessages(s.opts.MaxInFlight))
		if err != nil {
			return nil, nil, fmt.Errorf("pulling from consumer %q: %w", cfg.Durable, err)
		}
		return c, it, nil
	}
	p.received.Store(time.Now().UnixNano())
	return p
}

// start binds the consumer and begins pulling; an error ends Run.
func (p *puller) start(ctx context.Context) error {
	c, it, err := p.open(ctx, p.cfg)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.current, p.iter = c, it
	return nil
}

// run hands out messages until ctx ends, then waits for the handlers in flight. The
// work runs on its own context: a shutdown lets in-flight messages finish and ack.
func (p *puller) run(ctx context.Context) {
	unstop := context.AfterFunc(ctx, p.stop)
	defer unstop()
	go p.watchdog(ctx)
	work := context.WithoutCancel(ctx)
	for {
		msg, more := p.fetch(ctx)
		if !more {
			break
		}
		if msg != nil {
			p.hand(work, msg)
		}
	}
	p.wg.Wait()
}

// fetch returns the next message; nil after a pull error, which the next call handles
// (a re-bind after a deleted consumer, a retry after a transient error). more is false
// once the loop is to end: the subscription is stopping.
func (p *puller) fetch(ctx context.Context) (msg jetstream.Msg, more bool) {
	it := p.iterator()
	msg, err := it.Next()
	switch {
	case err == nil:
		p.received.Store(time.Now().UnixNano())
		return msg, true
	case errors.Is(err, jetstream.ErrMsgIteratorClosed):
		// Stopped (the end), or replaced by the watchdog or a deleted consumer: pull again.
		return nil, !p.isStopping() && p.repull(ctx)
	case errors.Is(err, jetstream.ErrConsumerDeleted), errors.Is(err, jetstream.ErrConsumerNotFound):
		p.s.bound.Store(false)
		p.s.log.Warn("EventBus consumer deleted: re-creating it", "consumer", p.cfg.Durable)
		it.Stop() // the next call re-binds (repull)
		return nil, true
	}
	p.s.log.Warn("pulling from the EventBus", "err", err)
	return nil, true
}

// hand runs msg's handler once one of the MaxInFlight slots is free.
func (p *puller) hand(ctx context.Context, msg jetstream.Msg) {
	p.sem <- struct{}{}
	p.wg.Add(1)
	go func() {
		defer func() { <-p.sem; p.wg.Done() }()
		p.handle(ctx, msg)
	}()
}

func (p *puller) iterator() jetstream.MessagesContext {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.iter
}

func (p *puller) consumer() jetstream.Consumer {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.current
}

func (p *puller) isStopping() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stopping
}

// stop ends the loop: the iterator stops pulling and Next returns ErrMsgIteratorClosed.
func (p *puller) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopping = true
	p.iter.Stop()
}

// restart makes the loop re-create the pull (fetch re-binds), unless it is stopping.
func (p *puller) restart() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.stopping {
		p.iter.Stop()
	}
}

// repull re-binds the consumer (re-creating it if it was deleted) and pulls again,
// retrying every rebindDelay until it works or ctx ends (then it returns false).
func (p *puller) repull(ctx context.Context) bool {
	for {
		c, it, err := p.open(ctx, p.rebindConfig())
		if err == nil {
			return p.swap(c, it)
		}
		p.s.bound.Store(false)
		p.s.log.Warn("re-binding the EventBus consumer", "consumer", p.cfg.Durable, "err", err)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(p.rebindDelay):
		}
	}
}

// swap makes it and c the loop's iterator and consumer; false (and it stopped) when the
// loop is stopping meanwhile.
func (p *puller) swap(c jetstream.Consumer, it jetstream.MessagesContext) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopping {
		it.Stop()
		return false
	}
	p.iter, p.current = it, c
	p.s.bound.Store(true)
	return true
}

// rebindConfig is the configuration a re-bind creates a deleted consumer with: it starts
// just before the last message received, not at "new" messages, so nothing published
// meanwhile is skipped (what is delivered again is handled idempotently).
func (p *puller) rebindConfig() jetstream.ConsumerConfig {
	cfg := p.cfg
	if cfg.DeliverPolicy == jetstream.DeliverNewPolicy {
		start := time.Unix(0, p.received.Load()).Add(-time.Second)
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &start
	}
	return cfg
}

// watchdog checks every StallTimeout/4 whether the pull must be re-created (check) and
// then restarts it.
func (p *puller) watchdog(ctx context.Context) {
	t := time.NewTicker(p.s.opts.StallTimeout / 4)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if p.check(ctx) {
			p.restarted = time.Now().UnixNano()
			p.restart()
		}
	}
}

// check reports whether the pull must be re-created: nothing arrived for StallTimeout
// (since the last message or the last restart) and the consumer is gone or stalled (see
// stalled). An unreachable server is no reason: the client reconnects by itself.
func (p *puller) check(ctx context.Context) bool {
	timeout := p.s.opts.StallTimeout
	idle := time.Since(time.Unix(0, max(p.received.Load(), p.restarted)))
	if idle < timeout {
		return false
	}
	ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
	info, err := p.consumer().Info(ictx)
	cancel()
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		// Deleted (e.g. the stream was re-created): re-bind, which re-creates it.
		p.s.bound.Store(false)
		p.s.log.Warn("EventBus consumer gone: re-creating it", "consumer", p.cfg.Durable)
		return true
	}
	if err != nil || !stalled(idle, timeout, info.NumPending, info.NumAckPending, info.Config.MaxAckPending, len(p.sem), cap(p.sem)) {
		return false
	}
	p.s.log.Warn("EventBus pull stalled: re-creating it", "pending", info.NumPending, "idle", idle.Round(time.Second))
	return true
}
