package watch

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// Breaker s5: a change of a key that is being handled, followed (before the handler is
// done) by a replay add of that key (the periodic resync), must stay urgent. The
// workqueue queues the key again only at Done (it was dirty while processing), and Push
// then reads the demote mark the later replay add left: the change waits behind the
// whole replay.
func TestLanesChangeDuringHandlingThenResyncStaysUrgent(t *testing.T) {
	lq := newLaneQueue()
	lq.urgent("x")
	k, _ := lq.q.Get() // a worker handles x
	assert.Equal(t, "x", k)
	lq.urgent("x")             // x changes while it is handled: must be handled again, urgently
	lq.replay("r1", "r2", "x") // the resync queues every cached object
	lq.l.replayDone(k)
	lq.q.Done(k) // the workqueue queues x again now
	assert.Equal(t, []string{"x", "r1", "r2"}, lq.drain(), "the change seen during handling goes before the replay")
}
