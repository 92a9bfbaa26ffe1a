package cache

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// Breaker s6: names that never arrive (forged by a caller of the receiver) cannot hold
// every in-flight slot for the wait. The dispatcher's slots (dispatch.DefaultMaxInFlight,
// 64) are shared by every way in, the watcher and the revision side included: with every
// wait held for its bound, 64 forged events a second stalled them all, where a live read
// at once (what the calls beyond the cap get) answers each in a GET's time.
func TestForgedNamesCannotHoldEverySlotInTheWait(t *testing.T) {
	const slots, long = 64, 30 * time.Second // long: never reached when the test passes
	c, _ := runFakeCache(t, Options{ReplicaSetWait: long})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	var atOnce atomic.Int64
	for i := range slots {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, ok := c.AwaitReplicaSet(ctx, "shop", fmt.Sprintf("forged-%02d", i), "forged"); !ok && ctx.Err() == nil {
				atOnce.Add(1)
			}
		}()
	}
	assert.Eventually(t, func() bool { return atOnce.Load() >= slots-slots/4 }, 10*time.Second, time.Millisecond,
		"at most a quarter of the slots wait for a name; the others are read live at once")
	cancel()
	wg.Wait()
	assert.LessOrEqual(t, c.Waits("cancelled"), int64(slots/4), "waits held until the caller gave up")
}
