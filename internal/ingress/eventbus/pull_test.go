package eventbus

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// fakeIter is a pull iterator that returns next's results in turn, then blocks until
// stopped (then ErrMsgIteratorClosed, as the client's does).
type fakeIter struct {
	mu      sync.Mutex
	next    []iterResult
	stopped chan struct{}
	once    sync.Once
}

type iterResult struct {
	msg jetstream.Msg
	err error
}

func newFakeIter(next ...iterResult) *fakeIter {
	return &fakeIter{next: next, stopped: make(chan struct{})}
}

func (f *fakeIter) Next(...jetstream.NextOpt) (jetstream.Msg, error) {
	f.mu.Lock()
	if len(f.next) > 0 {
		r := f.next[0]
		f.next = f.next[1:]
		f.mu.Unlock()
		return r.msg, r.err
	}
	f.mu.Unlock()
	<-f.stopped
	return nil, jetstream.ErrMsgIteratorClosed
}

func (f *fakeIter) Stop()  { f.once.Do(func() { close(f.stopped) }) }
func (f *fakeIter) Drain() { f.Stop() }

func (f *fakeIter) isStopped() bool {
	select {
	case <-f.stopped:
		return true
	default:
		return false
	}
}

// fakeConsumer is a durable consumer whose Info is info or err.
type fakeConsumer struct {
	jetstream.Consumer
	info *jetstream.ConsumerInfo
	err  error
}

func (c *fakeConsumer) Info(context.Context) (*jetstream.ConsumerInfo, error) { return c.info, c.err }

// fakeMsg is a message of which only Subject, Data and the metadata are read.
type fakeMsg struct {
	jetstream.Msg
	subject string
}

func (m *fakeMsg) Subject() string { return m.subject }

// testPuller is a puller over iter whose re-binds return the next of opens (or fail
// once they run out) and whose handler records the messages.
func testPuller(t *testing.T, iter *fakeIter, opens ...*fakeIter) (*puller, chan jetstream.Msg) {
	t.Helper()
	s, err := NewSubscriber(SubscriberOptions{URL: "nats://127.0.0.1:1", Logger: testfix.Quiet(), Registerer: prometheus.NewRegistry(),
		MaxInFlight: 2, StallTimeout: time.Minute}, nopDispatcher{})
	require.NoError(t, err)
	handled := make(chan jetstream.Msg, 10)
	var mu sync.Mutex
	p := &puller{s: s, cfg: s.consumerConfig(), rebindDelay: time.Millisecond, sem: make(chan struct{}, s.opts.MaxInFlight),
		handle: func(_ context.Context, msg jetstream.Msg) { handled <- msg },
		open: func(context.Context, jetstream.ConsumerConfig) (jetstream.Consumer, jetstream.MessagesContext, error) {
			mu.Lock()
			defer mu.Unlock()
			if len(opens) == 0 {
				return nil, nil, errors.New("test: no consumer")
			}
			it := opens[0]
			opens = opens[1:]
			return &fakeConsumer{}, it, nil
		}}
	p.iter, p.current = iter, &fakeConsumer{}
	p.received.Store(time.Now().UnixNano())
	return p, handled
}

type nopDispatcher struct{}

func (nopDispatcher) Dispatch(context.Context, dispatch.Request) dispatch.Answer {
	return dispatch.Answer{}
}
func (nopDispatcher) Reject(context.Context, dispatch.Path, core.Event, error) dispatch.Answer {
	return dispatch.Answer{}
}
func (nopDispatcher) GaveUp(dispatch.Path, core.Event, string, error) {}

// fetch returns a message, and after a pull error goes on (re-binding after a deleted
// consumer or a replaced iterator); only a stop ends the loop.
func TestFetchGoesOnAfterEveryPullErrorButAStop(t *testing.T) {
	msg := &fakeMsg{subject: "default.replicasets.replicaset-add"}
	for _, tc := range []struct {
		name      string
		result    iterResult
		stopping  bool
		opens     []*fakeIter
		wantMsg   bool
		wantMore  bool
		wantBound bool
		stopsIter bool
		swapped   bool
	}{
		{name: "a message", result: iterResult{msg: msg}, wantMsg: true, wantMore: true, wantBound: true},
		{name: "a transient pull error", result: iterResult{err: errors.New("nats: timeout")}, wantMore: true, wantBound: true},
		{name: "the consumer deleted", result: iterResult{err: jetstream.ErrConsumerDeleted}, wantMore: true, stopsIter: true},
		{name: "the consumer not found", result: iterResult{err: jetstream.ErrConsumerNotFound}, wantMore: true, stopsIter: true},
		{name: "the iterator replaced", result: iterResult{err: jetstream.ErrMsgIteratorClosed}, opens: []*fakeIter{newFakeIter()},
			wantMore: true, wantBound: true, swapped: true},
		{name: "stopping", result: iterResult{err: jetstream.ErrMsgIteratorClosed}, stopping: true, wantBound: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			iter := newFakeIter(tc.result)
			p, _ := testPuller(t, iter, tc.opens...)
			p.s.bound.Store(true)
			p.stopping = tc.stopping
			before := p.received.Load()
			got, more := p.fetch(context.Background())
			assert.Equal(t, tc.wantMsg, got != nil, "a message")
			assert.Equal(t, tc.wantMore, more, "the loop goes on")
			assert.Equal(t, tc.wantBound, p.s.bound.Load(), "Health's bound")
			assert.Equal(t, tc.stopsIter, iter.isStopped(), "the iterator stopped for a re-bind")
			assert.Equal(t, tc.swapped, p.iterator() != iter, "a new iterator")
			if tc.wantMsg {
				assert.GreaterOrEqual(t, p.received.Load(), before, "the arrival recorded for the watchdog")
			}
		})
	}
}

// A re-bind that keeps failing ends when the subscription stops, and marks it unbound.
func TestRepullRetriesUntilTheStop(t *testing.T) {
	p, _ := testPuller(t, newFakeIter())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan bool)
	go func() { done <- p.repull(ctx) }()
	cancel()
	assert.False(t, <-done)
	assert.False(t, p.s.bound.Load())
}

// A re-created consumer starts just before the last message received, never at "new"
// messages: nothing published while it was gone is skipped.
func TestRebindConfigStartsBeforeTheLastMessage(t *testing.T) {
	p, _ := testPuller(t, newFakeIter())
	last := time.Now().Add(-time.Hour)
	p.received.Store(last.UnixNano())
	cfg := p.rebindConfig()
	assert.Equal(t, jetstream.DeliverByStartTimePolicy, cfg.DeliverPolicy)
	require.NotNil(t, cfg.OptStartTime)
	assert.Equal(t, last.Add(-time.Second).UnixNano(), cfg.OptStartTime.UnixNano())
	p.cfg.DeliverPolicy = jetstream.DeliverAllPolicy
	assert.Equal(t, jetstream.DeliverAllPolicy, p.rebindConfig().DeliverPolicy, "--eventbus-deliver-all keeps its policy")
}

// hand runs at most MaxInFlight handlers at once; run waits for them after the stop.
func TestHandBoundsTheHandlersInFlight(t *testing.T) {
	p, handled := testPuller(t, newFakeIter())
	release := make(chan struct{})
	p.handle = func(_ context.Context, msg jetstream.Msg) { <-release; handled <- msg }
	ctx := context.Background()
	p.hand(ctx, &fakeMsg{})
	p.hand(ctx, &fakeMsg{})
	third := make(chan struct{})
	go func() { p.hand(ctx, &fakeMsg{}); close(third) }()
	assert.Len(t, p.sem, cap(p.sem), "every slot taken")
	select {
	case <-third:
		t.Fatal("a third handler started with MaxInFlight 2")
	default:
	}
	close(release)
	<-third
	p.wg.Wait()
	assert.Len(t, handled, 3)
}

// restart replaces the iterator unless the loop is stopping; stop ends it for good.
func TestRestartAndStop(t *testing.T) {
	iter := newFakeIter()
	p, _ := testPuller(t, iter, newFakeIter())
	p.restart()
	assert.True(t, iter.isStopped(), "the watchdog's restart stops the iterator")
	_, more := p.fetch(context.Background())
	assert.True(t, more, "and the loop pulls again")
	next := p.iterator().(*fakeIter)
	p.stop()
	assert.True(t, next.isStopped())
	_, more = p.fetch(context.Background())
	assert.False(t, more, "a stop ends the loop")
}

// The watchdog re-creates the pull only after StallTimeout without a message, when the
// consumer is gone or stalled; not while messages arrive, nor when the server cannot be
// asked.
func TestWatchdogCheck(t *testing.T) {
	stalledInfo := &jetstream.ConsumerInfo{NumPending: 3, Config: jetstream.ConsumerConfig{MaxAckPending: 100}}
	for _, tc := range []struct {
		name      string
		idle      time.Duration
		info      *jetstream.ConsumerInfo
		err       error
		want      bool
		wantBound bool
	}{
		{"messages arriving", 0, stalledInfo, nil, false, true},
		{"idle and stalled", 2 * time.Minute, stalledInfo, nil, true, true},
		{"idle with nothing pending", 2 * time.Minute, &jetstream.ConsumerInfo{Config: stalledInfo.Config}, nil, false, true},
		{"idle, the consumer gone", 2 * time.Minute, nil, jetstream.ErrConsumerNotFound, true, false},
		{"idle, the server unreachable", 2 * time.Minute, nil, errors.New("nats: timeout"), false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := testPuller(t, newFakeIter())
			p.s.bound.Store(true)
			p.current = &fakeConsumer{info: tc.info, err: tc.err}
			p.received.Store(time.Now().Add(-tc.idle).UnixNano())
			assert.Equal(t, tc.want, p.check(context.Background()))
			assert.Equal(t, tc.wantBound, p.s.bound.Load())
		})
	}
	p, _ := testPuller(t, newFakeIter())
	p.current = &fakeConsumer{info: stalledInfo}
	p.received.Store(time.Now().Add(-time.Hour).UnixNano())
	p.restarted = time.Now().UnixNano()
	assert.False(t, p.check(context.Background()), "idle time counts from the last restart")
}
