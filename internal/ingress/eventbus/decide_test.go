package eventbus

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
