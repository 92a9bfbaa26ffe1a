package eventbus

import (
	"context"
	"errors"
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

// Every answer class gets its JetStream answer (docs/design.md, "Answers"): a retryable
// one is Nak'd with a delay doubling per delivery up to MaxNakDelay, and given up on the
// MaxDeliver-th delivery (a stop one delivery later); the delivery count is read only
// for a retryable class.
func TestDecideAnswersEveryClass(t *testing.T) {
	s, err := NewSubscriber(SubscriberOptions{URL: "nats://127.0.0.1:1", Logger: testfix.Quiet(), Registerer: prometheus.NewRegistry(),
		NakDelay: time.Second, MaxNakDelay: 10 * time.Second, MaxDeliver: 5}, nopDispatcher{})
	require.NoError(t, err)
	delivered := func(n uint64) func() (*jetstream.MsgMetadata, error) {
		return func() (*jetstream.MsgMetadata, error) { return &jetstream.MsgMetadata{NumDelivered: n}, nil }
	}
	unread := func() (*jetstream.MsgMetadata, error) {
		t.Error("the delivery count read for a final answer")
		return nil, errors.New("unread")
	}
	unknown := func() (*jetstream.MsgMetadata, error) { return nil, errors.New("no metadata") }
	for _, tc := range []struct {
		name     string
		class    dispatch.Class
		metadata func() (*jetstream.MsgMetadata, error)
		want     decision
	}{
		{"done", dispatch.ClassOK, unread, decision{outcome: OutcomeAck}},
		{"not an ADD", dispatch.ClassIgnored, unread, decision{outcome: OutcomeIgnore}},
		{"bad input", dispatch.ClassInvalid, unread, decision{outcome: OutcomeTerm}},
		{"refused", dispatch.ClassRefused, unread, decision{outcome: OutcomeTerm}},
		{"permanent", dispatch.ClassPermanent, unread, decision{outcome: OutcomeTerm}},
		{"unavailable, first delivery", dispatch.ClassUnavailable, delivered(1), decision{outcome: OutcomeNak, delay: time.Second}},
		{"busy, third delivery", dispatch.ClassBusy, delivered(3), decision{outcome: OutcomeNak, delay: 4 * time.Second}},
		{"deadline, fourth delivery", dispatch.ClassDeadline, delivered(4), decision{outcome: OutcomeNak, delay: 8 * time.Second}},
		{"unavailable, the delivery count unknown", dispatch.ClassUnavailable, unknown, decision{outcome: OutcomeNak, delay: time.Second}},
		{"unavailable, the last delivery", dispatch.ClassUnavailable, delivered(5),
			decision{outcome: OutcomeTerm, delay: 10 * time.Second, giveUp: true, delivered: 5}},
		{"shutting down, the last delivery", dispatch.ClassShuttingDown, delivered(5), decision{outcome: OutcomeNak, delay: 10 * time.Second}},
		{"shutting down, one more", dispatch.ClassShuttingDown, delivered(6),
			decision{outcome: OutcomeTerm, delay: 10 * time.Second, giveUp: true, delivered: 6}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, s.decide(dispatch.Answer{Class: tc.class}, tc.metadata))
		})
	}
}

// recordingMsg is a message that records how it was answered.
type recordingMsg struct {
	jetstream.Msg
	delivered uint64
	answers   []string
}

func (m *recordingMsg) Data() []byte {
	return []byte(`{"type":"ADD","body":{"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"name":"web-1","namespace":"shop","uid":"u1"}}}`)
}
func (m *recordingMsg) Subject() string   { return "default.replicasets.replicaset-add" }
func (m *recordingMsg) InProgress() error { return nil }
func (m *recordingMsg) Metadata() (*jetstream.MsgMetadata, error) {
	return &jetstream.MsgMetadata{NumDelivered: m.delivered}, nil
}
func (m *recordingMsg) DoubleAck(context.Context) error {
	m.answers = append(m.answers, "ack")
	return nil
}
func (m *recordingMsg) Ack() error { m.answers = append(m.answers, "ack (ignored)"); return nil }
func (m *recordingMsg) TermWithReason(string) error {
	m.answers = append(m.answers, "term")
	return nil
}
func (m *recordingMsg) NakWithDelay(d time.Duration) error {
	m.answers = append(m.answers, "nak "+d.String())
	return nil
}

// classDispatcher answers every event with class, naming event, and records give-ups.
type classDispatcher struct {
	nopDispatcher
	class  dispatch.Class
	event  core.Event
	gaveUp []core.Event
}

func (d *classDispatcher) Dispatch(context.Context, dispatch.Request) dispatch.Answer {
	return dispatch.Answer{Class: d.class, Err: errors.New(string(d.class)), Event: d.event}
}

func (d *classDispatcher) GaveUp(_ dispatch.Path, ev core.Event, _ string, _ error) {
	d.gaveUp = append(d.gaveUp, ev)
}

// handle answers JetStream exactly once per message, and a give-up names the event of
// the dispatcher's answer (Answer.Event), not one rebuilt from the response.
func TestHandleAnswersOnce(t *testing.T) {
	ev := core.Event{Cluster: "east", Namespace: "shop", Name: "web-1", UID: "u1"}
	for _, tc := range []struct {
		name      string
		class     dispatch.Class
		delivered uint64
		want      string
		gaveUp    bool
	}{
		{"done", dispatch.ClassOK, 1, "ack", false},
		{"not an ADD", dispatch.ClassIgnored, 1, "ack (ignored)", false},
		{"refused", dispatch.ClassRefused, 1, "term", false},
		{"unavailable", dispatch.ClassUnavailable, 2, "nak 2s", false},
		{"unavailable, the last delivery", dispatch.ClassUnavailable, 3, "term", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &classDispatcher{class: tc.class, event: ev}
			s, err := NewSubscriber(SubscriberOptions{URL: "nats://127.0.0.1:1", Logger: testfix.Quiet(), Registerer: prometheus.NewRegistry(),
				NakDelay: time.Second, MaxDeliver: 3}, d)
			require.NoError(t, err)
			msg := &recordingMsg{delivered: tc.delivered}
			s.handle(context.Background(), msg)
			assert.Equal(t, []string{tc.want}, msg.answers)
			if tc.gaveUp {
				assert.Equal(t, []core.Event{ev}, d.gaveUp)
			} else {
				assert.Empty(t, d.gaveUp)
			}
		})
	}
}
