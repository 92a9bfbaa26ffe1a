package cluster

import (
	"sync"
	"time"
)

// memoryReturn runs a process-wide forced collection (debug.FreeOSMemory) at most once
// per interval however many clusters finish their start-up: each request either runs it
// now (none ran within the interval) or leaves one run due at the interval's end, which
// covers every request made meanwhile. Hundreds of clusters starting together (a fleet
// replica taking its share) would otherwise force hundreds of full collections, each
// seconds long on a large heap (docs/design.md, "Memory after start-up").
type memoryReturn struct {
	free     func()
	interval time.Duration

	mu      sync.Mutex
	last    time.Time
	pending bool
}

// request asks for a collection; it returns whether one ran now.
func (m *memoryReturn) request() bool {
	m.mu.Lock()
	if m.pending {
		m.mu.Unlock()
		return false
	}
	if wait := m.interval - time.Since(m.last); !m.last.IsZero() && wait > 0 {
		m.pending = true
		m.mu.Unlock()
		time.AfterFunc(wait, m.runPending)
		return false
	}
	m.last = time.Now()
	m.mu.Unlock()
	m.free()
	return true
}

func (m *memoryReturn) runPending() {
	m.mu.Lock()
	m.pending, m.last = false, time.Now()
	m.mu.Unlock()
	m.free()
}
