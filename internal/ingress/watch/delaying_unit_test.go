package watch

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/util/workqueue"
)

// A retry's backoff is a timer: the key is queued once it has passed, a second backoff
// of a waiting key keeps the earlier time, and a shut-down queue keeps no timer (so a
// stopped watcher leaves nothing behind: docs/design.md, "Per-cluster cost").
func TestRetryBackoffQueuesOnceAndEndsWithTheQueue(t *testing.T) {
	q := newTimerDelaying(workqueue.NewTyped[string]())
	q.AddAfter("now", 0)
	q.AddAfter("soon", 10*time.Millisecond)
	q.AddAfter("soon", time.Hour) // later than the one waiting: kept at the earlier time
	q.AddAfter("late", time.Hour)
	q.AddAfter("late", 20*time.Millisecond) // earlier than the one waiting: moved up
	var got []string
	for range 3 {
		k, quit := q.Get()
		require.False(t, quit)
		got = append(got, k)
		q.Done(k)
	}
	assert.ElementsMatch(t, []string{"now", "soon", "late"}, got) // an hour's wait would block Get
	q.mu.Lock()
	assert.Empty(t, q.waiting, "keys waiting after they were queued")
	q.mu.Unlock()

	q.AddAfter("never", time.Hour)
	q.ShutDown()
	q.mu.Lock()
	assert.Empty(t, q.waiting, "timers left after the shutdown")
	q.mu.Unlock()
	q.AddAfter("after", time.Millisecond)
	_, quit := q.Get()
	assert.True(t, quit, "a key added after the shutdown")
}
