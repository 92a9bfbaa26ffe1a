package eventbus

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestStalled(t *testing.T) {
	const timeout = time.Minute
	cases := []struct {
		name                                          string
		idle                                          time.Duration
		pending                                       uint64
		ackPending, maxAckPending, inFlight, capacity int
		want                                          bool
	}{
		{"messages waiting, room, idle past the timeout", 2 * timeout, 5, 0, 64, 0, 16, true},
		{"idle but nothing pending", 2 * timeout, 0, 0, 64, 0, 16, false},
		{"pending but a message arrived recently", timeout / 2, 5, 0, 64, 0, 16, false},
		{"the server holds back: ack pending at the limit (AckWait redelivers)", 2 * timeout, 5, 64, 64, 0, 16, false},
		{"no ack-pending limit", 2 * timeout, 5, 1000, -1, 0, 16, true},
		{"every worker busy (slow apiserver, not a stall)", 2 * timeout, 5, 16, 64, 16, 16, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, stalled(tc.idle, timeout, tc.pending, tc.ackPending, tc.maxAckPending, tc.inFlight, tc.capacity))
		})
	}
}
