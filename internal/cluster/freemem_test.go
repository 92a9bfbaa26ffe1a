package cluster

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// Many clusters finishing their start-up together force one collection at once and one
// more at the end of the interval, not one each.
func TestManyStartUpsForceOneCollectionPerInterval(t *testing.T) {
	var runs atomic.Int64
	m := &memoryReturn{free: func() { runs.Add(1) }, interval: 200 * time.Millisecond}
	ranNow := 0
	for range 100 {
		if m.request() {
			ranNow++
		}
	}
	assert.Equal(t, 1, ranNow, "the first request runs at once")
	assert.Eventually(t, func() bool { return runs.Load() == 2 }, 5*time.Second, 10*time.Millisecond,
		"the requests made within the interval are covered by one run at its end")
	time.Sleep(400 * time.Millisecond)
	assert.Equal(t, int64(2), runs.Load(), "nothing more without a request")
	assert.True(t, m.request(), "a request after a quiet interval runs at once")
}
