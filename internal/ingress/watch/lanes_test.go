package watch

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/client-go/util/workqueue"
)

// laneQueue is a client-go workqueue over lanes, as the watcher builds it, with the
// watcher's two kinds of add.
type laneQueue struct {
	l *lanes
	q *workqueue.Typed[string]
}

func newLaneQueue() laneQueue {
	l := newLanes(2)
	return laneQueue{l: l, q: workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{Queue: l})}
}

func (lq laneQueue) replay(keys ...string) {
	for _, k := range keys {
		lq.l.demote(k)
		lq.q.Add(k)
	}
}

func (lq laneQueue) urgent(keys ...string) {
	for _, k := range keys {
		lq.l.promote(k)
		lq.q.Add(k)
	}
}

// drain takes every queued key in order (each marked done at once).
func (lq laneQueue) drain() []string {
	var out []string
	for lq.q.Len() > 0 {
		out = append(out, mustGet(lq))
	}
	return out
}

// The lanes order the workqueue: urgent keys first, then the replay, each key once.
func TestLanesOrderUrgentBeforeReplay(t *testing.T) {
	cases := []struct {
		name string
		adds func(lq laneQueue)
		want []string
	}{
		{"a change queued after the replay goes first", func(lq laneQueue) { lq.replay("a", "b", "c"); lq.urgent("new") },
			[]string{"new", "a", "b", "c"}},
		{"a change of a key waiting in the replay moves it, once", func(lq laneQueue) { lq.replay("a", "b", "c"); lq.urgent("c") },
			[]string{"c", "a", "b"}},
		{"a replay of a key queued urgent leaves it urgent", func(lq laneQueue) { lq.urgent("a"); lq.replay("b", "a") },
			[]string{"a", "b"}},
		{"a replay queued twice is handled once", func(lq laneQueue) { lq.replay("a", "b", "a") }, []string{"a", "b"}},
		{"urgent keys keep their order", func(lq laneQueue) { lq.replay("r"); lq.urgent("x", "y"); lq.replay("s"); lq.urgent("z") },
			[]string{"x", "y", "z", "r", "s"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lq := newLaneQueue()
			tc.adds(lq)
			assert.Equal(t, tc.want, lq.drain())
			assert.Zero(t, lq.l.Len())
		})
	}
}

// A key added while a worker holds it is queued again when the worker is done, in the
// lane of that add; a key promoted and handled leaves no trace in the replay lane.
func TestLanesKeepWorkqueueSemantics(t *testing.T) {
	t.Run("replay add during processing requeues in the replay lane", func(t *testing.T) {
		lq := newLaneQueue()
		lq.urgent("a")
		k, _ := lq.q.Get()
		lq.replay("a")
		lq.urgent("b")
		lq.q.Done(k)
		assert.Equal(t, []string{"b", "a"}, lq.drain())
	})
	t.Run("urgent add during processing requeues urgent", func(t *testing.T) {
		lq := newLaneQueue()
		lq.replay("a", "r")
		k, _ := lq.q.Get()
		lq.urgent("a")
		lq.q.Done(k)
		assert.Equal(t, []string{"a", "r"}, lq.drain())
	})
	t.Run("promoted then replayed again is handled once per add", func(t *testing.T) {
		lq := newLaneQueue()
		lq.replay("a", "b")
		lq.urgent("a") // a moves to urgent; a stale replay entry stays behind
		assert.Equal(t, []string{"a"}, []string{mustGet(lq)})
		lq.replay("a") // queued again in the replay lane, behind the stale entry
		assert.Equal(t, 2, lq.q.Len())
		assert.ElementsMatch(t, []string{"a", "b"}, lq.drain())
		assert.Zero(t, lq.l.Len())
	})
	t.Run("a replay lane left with stale entries only is dropped", func(t *testing.T) {
		lq := newLaneQueue()
		lq.replay("a", "b")
		lq.urgent("a", "b") // both move; only stale entries are left behind
		assert.Empty(t, lq.l.replay.entries)
		assert.Equal(t, []string{"a", "b"}, lq.drain())
	})
	t.Run("replayed keys in progress are bounded, changes are not", func(t *testing.T) {
		lq := newLaneQueue() // replayCap 2
		lq.replay("r1", "r2", "r3")
		a, _ := lq.q.Get()
		b, _ := lq.q.Get()
		assert.Equal(t, []string{"r1", "r2"}, []string{a, b})
		assert.Zero(t, lq.q.Len(), "r3 waits while two replayed keys are in progress")
		lq.urgent("new")
		assert.Equal(t, "new", mustGet(lq), "a change is taken while the replay is at its bound")
		lq.l.replayDone(a)
		lq.q.Done(a)
		assert.Equal(t, "r3", mustGet(lq), "a finished replayed key frees its slot")
		lq.l.replayDone(b)
		lq.q.Done(b)
		assert.Zero(t, lq.q.Len())
	})
	t.Run("shutdown hands out nothing more once empty", func(t *testing.T) {
		lq := newLaneQueue()
		lq.replay("a")
		lq.q.ShutDown()
		lq.urgent("b") // ignored after shutdown
		k, quit := lq.q.Get()
		assert.Equal(t, "a", k)
		assert.False(t, quit)
		lq.q.Done(k)
		_, quit = lq.q.Get()
		assert.True(t, quit)
	})
}

// mustGet takes one key and is done with it, as a watcher worker is.
func mustGet(lq laneQueue) string {
	k, _ := lq.q.Get()
	lq.l.replayDone(k)
	lq.q.Done(k)
	return k
}

// A key taken from the urgent lane once a pass has begun is skipped by that pass, also
// when the pass was begun early (before the workers start) and begun again by the pass
// itself; a later pass starts afresh.
func TestUrgentKeyTakenBeforeThePassReadsIsSkipped(t *testing.T) {
	lq := newLaneQueue()
	lq.l.beginPass() // the watcher, before its workers
	lq.urgent("ReplicaSet/ns/a")
	assert.Equal(t, "ReplicaSet/ns/a", mustGet(lq))
	lq.l.beginPass() // the start-up pass itself
	assert.True(t, lq.l.handledInPass("ReplicaSet/ns/a"))
	assert.False(t, lq.l.handledInPass("ReplicaSet/ns/b"))
	lq.l.endPass()
	lq.l.beginPass() // the next resync
	assert.False(t, lq.l.handledInPass("ReplicaSet/ns/a"))
}

// A worker's key says which lane it came from: a replayed key takes one of the
// dispatcher's replay share of slots (dispatch.Request.Replay), a change does not, and
// the key is no longer a replay once its worker is done with it.
func TestLanesTellAReplayedKeyFromAChange(t *testing.T) {
	lq := newLaneQueue()
	lq.replay("r")
	lq.urgent("u")
	u, _ := lq.q.Get()
	r, _ := lq.q.Get()
	assert.Equal(t, []string{"u", "r"}, []string{u, r})
	assert.False(t, lq.l.replaying(u), "a change")
	assert.True(t, lq.l.replaying(r), "a replayed key")
	lq.l.replayDone(r)
	assert.False(t, lq.l.replaying(r), "done")
	lq.q.Done(u)
	lq.q.Done(r)
}
