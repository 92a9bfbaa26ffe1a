package watch

import (
	"context"
	"sync"
)

// lanes is the storage under the watcher's client-go workqueue (workqueue.Queue): two
// FIFO lanes, urgent and replay. Pop takes from the replay lane only when the urgent one
// is empty, so a change made after start is handled before the start-up replay of the
// informers' initial lists and the periodic resync (docs/design.md, "The watcher's two
// lanes"). The workqueue above it is unchanged: it still dedups a key queued twice, never
// hands one key to two workers, and owns retries and shutdown; lanes only orders.
//
// At most replayCap replayed keys are handled at once (replayDone ends one): Len hides
// the replay lane while that many are in progress, so the workers left over are free
// for changes, and a replay (answered from the caches: CPU, no request) cannot take
// every worker's share of the CPU.
//
// The replay lane is fed a few keys ahead of the workers (Watcher.replayPass waits in
// waitRoom), so a replay of N objects holds O(workers) keys, not N: the start-up replay
// of a large cluster would otherwise queue every key at once.
//
// Push, Touch, Len and Pop are called under the workqueue's lock; demote is called by
// the watcher before it adds a replay key, so lanes has a lock of its own for that.
type lanes struct {
	mu     sync.Mutex
	urgent []string
	replay []string
	// inReplay: the keys live in the replay lane. A key promoted out of it leaves a
	// stale entry behind, skipped by Pop.
	inReplay map[string]bool
	// demoted: keys whose next Push or Touch is a replay add (set by demote).
	demoted map[string]bool
	// urgentAdd: keys whose last add was urgent and not yet taken by Push or Touch (the
	// key is being handled: the workqueue pushes it at Done). A replay add then does not
	// demote it.
	urgentAdd map[string]bool
	live      int // live entries of the replay lane
	// busy: replayed keys being handled, at most replayCap.
	busy      map[string]bool
	replayCap int
	// room is signalled (never blocking) when the replay backlog shrinks; waitRoom waits on it.
	room chan struct{}
	// passKeys: while a replay pass runs, the keys taken from the urgent lane since it
	// began. They were handled after the pass's snapshot: the pass skips them.
	passKeys map[string]struct{}
}

func newLanes(replayCap int) *lanes {
	return &lanes{inReplay: map[string]bool{}, demoted: map[string]bool{}, urgentAdd: map[string]bool{}, busy: map[string]bool{},
		replayCap: max(replayCap, 1), room: make(chan struct{}, 1)}
}

// signal wakes a waitRoom (called with l.mu held).
func (l *lanes) signal() {
	select {
	case l.room <- struct{}{}:
	default:
	}
}

// waitRoom waits until fewer than depth replayed keys are queued or being handled. It
// returns false once ctx has ended, room or not: after the stop the queue takes no adds,
// so a pass would never fill the lane again and would run through every key.
func (l *lanes) waitRoom(ctx context.Context, depth int) bool {
	for {
		if ctx.Err() != nil {
			return false
		}
		l.mu.Lock()
		backlog := l.live + len(l.busy)
		l.mu.Unlock()
		if backlog < depth {
			return true
		}
		select {
		case <-l.room:
		case <-ctx.Done():
			return false
		}
	}
}

// beginPass and endPass bracket a replay pass; handledInPass reports whether key was
// taken from the urgent lane since the pass began. A pass already begun goes on (the
// watcher begins the start-up pass before its workers take the first key).
func (l *lanes) beginPass() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.passKeys == nil {
		l.passKeys = map[string]struct{}{}
	}
}

func (l *lanes) endPass() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.passKeys = nil
}

func (l *lanes) handledInPass(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.passKeys[key]
	return ok
}

// replayDone reports that the worker holding key is done with it: when it came from the
// replay lane, its slot is free (the worker's next Get can take the next replayed key).
func (l *lanes) replayDone(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.busy[key] {
		delete(l.busy, key)
		l.signal()
	}
}

// demote marks the next add of key as a replay (initial list, resync): it goes to the
// replay lane, unless the key is queued urgent already.
func (l *lanes) demote(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.urgentAdd[key] {
		return // an urgent add not pushed yet (the key is being handled) stays urgent
	}
	l.demoted[key] = true
}

// promote marks the next add of key as urgent (the default): it undoes a demote that
// no add consumed yet.
func (l *lanes) promote(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.demoted, key)
	l.urgentAdd[key] = true
}

// Push queues a key that is not queued: in the replay lane when demoted, else urgent
// (a change, or a retry: AddRateLimited's add).
func (l *lanes) Push(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.urgentAdd, key)
	if l.demoted[key] {
		delete(l.demoted, key)
		l.replay = append(l.replay, key)
		l.inReplay[key] = true
		l.live++
		return
	}
	l.urgent = append(l.urgent, key)
}

// Touch is an add of a key already queued: an urgent add moves it from the replay lane
// to the urgent one; a replay add leaves it where it is.
func (l *lanes) Touch(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.urgentAdd, key)
	if l.demoted[key] {
		delete(l.demoted, key)
		return
	}
	if l.inReplay[key] {
		delete(l.inReplay, key)
		l.live--
		l.urgent = append(l.urgent, key)
		l.trim()
		l.signal()
	}
}

// Len is the number of keys a worker may take now: the urgent ones, and the replayed
// ones unless replayCap of them are being handled.
func (l *lanes) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.busy) >= l.replayCap {
		return len(l.urgent)
	}
	return len(l.urgent) + l.live
}

// Pop returns the first urgent key, else the first live replay key. The workqueue calls
// it only when Len is above 0.
func (l *lanes) Pop() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.urgent) > 0 {
		key := l.urgent[0]
		l.urgent[0] = ""
		l.urgent = l.urgent[1:]
		if l.passKeys != nil {
			l.passKeys[key] = struct{}{}
		}
		return key
	}
	for {
		key := l.replay[0]
		l.replay[0] = ""
		l.replay = l.replay[1:]
		if l.inReplay[key] {
			delete(l.inReplay, key)
			l.live--
			l.busy[key] = true
			l.trim()
			return key
		}
	}
}

// trim drops the replay lane once nothing live is left in it: what remains are stale
// entries, and a Go map never shrinks (the start-up replay's would stay its size).
func (l *lanes) trim() {
	if l.live == 0 && (len(l.replay) > 0 || len(l.inReplay) > 0) {
		l.inReplay, l.replay = map[string]bool{}, nil
	}
}
