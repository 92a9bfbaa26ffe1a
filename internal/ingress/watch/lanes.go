package watch

import (
	"context"
	"sync"
)

// lanes is the storage under a Watcher's client-go workqueue (workqueue.Queue): two FIFO
// lanes, urgent and replay. Pop takes from the replay lane only when the urgent one is
// empty, so a change made after start is handled before the start-up replay of the
// informers' initial lists and the periodic resync (docs/design.md, "The watcher's two
// lanes"). The workqueue above it is unchanged: it still dedups a key queued twice, never
// hands one key to two workers, and owns retries and shutdown; lanes only orders.
//
// lanes is made of small parts, each with its own invariant (and its own test):
//
//   - urgent (fifo): changes seen after start and retries, in the order they were pushed.
//   - replay (replayLane): the replayed keys, fed a few ahead of the workers.
//   - marks (addMarks): the lane the next add of a key goes to (workqueue.Add carries none).
//   - slots (replaySlots): the replayed keys being handled, at most a quarter of the
//     workers: while they are all taken Len hides the replay lane, so the workers left
//     over are free for changes, and a replay (answered from the caches: CPU, no request)
//     cannot take every worker's share of the CPU.
//   - pass (passLog): while a replay pass runs, the keys taken from the urgent lane since
//     it began; the pass skips them.
//
// How the workqueue's operations reach it:
//
//   - Add of a key not queued calls Push; of a key queued and not being handled, Touch;
//     of a key being handled, nothing until Done, which then calls Push. The watcher sets
//     the mark (demote or promote) before each Add, so the mark is read at that Push or
//     Touch.
//   - Retry (AddRateLimited) is a plain Add after the backoff, without a mark: the key
//     goes urgent (unless a replay add of it is pending, which it then joins).
//   - Forget only resets the rate limiter's count: lanes is not told.
//   - ShutDown: Add becomes a no-op, so a mark set afterwards is never read (the watcher's
//     replay pass stops at the stop: waitRoom); Get hands out what is queued until empty
//     (the watcher's workers drop it, being stopped).
//
// Push, Touch, Len and Pop are called under the workqueue's lock; demote and promote are
// called by the watcher before it adds a key, replayDone after a worker is done with one,
// and waitRoom and the pass methods by the replay pass, so lanes has a lock of its own.
type lanes struct {
	mu     sync.Mutex
	urgent fifo
	replay replayLane
	marks  addMarks
	slots  replaySlots
	pass   passLog
	// room is signalled (never blocking) when the replay backlog shrinks; waitRoom waits on it.
	room chan struct{}
}

func newLanes(replayCap int) *lanes {
	return &lanes{replay: newReplayLane(), marks: newAddMarks(), slots: newReplaySlots(replayCap),
		room: make(chan struct{}, 1)}
}

// signal wakes a waitRoom (called with l.mu held).
func (l *lanes) signal() {
	select {
	case l.room <- struct{}{}:
	default:
	}
}

// backlog is the number of replayed keys queued or being handled.
func (l *lanes) backlog() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.replay.len() + l.slots.len()
}

// waitRoom waits until fewer than depth replayed keys are queued or being handled. It
// returns false once ctx has ended, room or not: after the stop the queue takes no adds,
// so a pass would never fill the lane again and would run through every key.
func (l *lanes) waitRoom(ctx context.Context, depth int) bool {
	for {
		if ctx.Err() != nil {
			return false
		}
		if l.backlog() < depth {
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
	l.pass.begin()
}

func (l *lanes) endPass() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pass.end()
}

func (l *lanes) handledInPass(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pass.seen(key)
}

// replayDone reports that the worker holding key is done with it: when it came from the
// replay lane, its slot is free (the worker's next Get can take the next replayed key).
func (l *lanes) replayDone(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.slots.release(key) {
		l.signal()
	}
}

// replaying reports whether the worker holding key took it from the replay lane.
func (l *lanes) replaying(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.slots.busy[key]
}

// demote marks the next add of key as a replay (initial list, resync): it goes to the
// replay lane, unless the key is queued urgent already.
func (l *lanes) demote(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.marks.demote(key)
}

// promote marks the next add of key as urgent (the default): it undoes a demote that
// no add consumed yet.
func (l *lanes) promote(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.marks.promote(key)
}

// Push queues a key that is not queued: in the replay lane when demoted, else urgent
// (a change, or a retry: AddRateLimited's add).
func (l *lanes) Push(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.marks.take(key) {
		l.replay.push(key)
		return
	}
	l.urgent.push(key)
}

// Touch is an add of a key already queued: an urgent add moves it from the replay lane
// to the urgent one; a replay add leaves it where it is.
func (l *lanes) Touch(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.marks.take(key) {
		return
	}
	if l.replay.remove(key) {
		l.urgent.push(key)
		l.signal()
	}
}

// Len is the number of keys a worker may take now: the urgent ones, and the replayed
// ones unless every replay slot is taken.
func (l *lanes) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.slots.full() {
		return l.urgent.len()
	}
	return l.urgent.len() + l.replay.len()
}

// Pop returns the first urgent key, else the first live replay key (which takes a replay
// slot). The workqueue calls it only when Len is above 0.
func (l *lanes) Pop() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.urgent.len() > 0 {
		key := l.urgent.pop()
		l.pass.note(key)
		return key
	}
	key := l.replay.pop()
	l.slots.take(key)
	return key
}

// fifo is the urgent lane: keys in the order pushed. Invariant: it holds each key at most
// once (the workqueue pushes only a key it does not hold).
type fifo struct{ keys []string }

func (f *fifo) push(key string) { f.keys = append(f.keys, key) }

// pop removes and returns the first key; the fifo must not be empty.
func (f *fifo) pop() string {
	key := f.keys[0]
	f.keys[0] = "" // the backing array does not keep the key alive
	f.keys = f.keys[1:]
	return key
}

func (f *fifo) len() int { return len(f.keys) }

// replayLane is the replay lane: a FIFO whose keys can leave from the middle (an urgent add
// moves a key to the urgent lane). Invariants: live holds exactly the keys in the lane
// (their number is the lane's length); entries holds them in push order, plus stale
// entries of keys removed since (pop skips them; a key pushed again while a stale entry
// of it is left is popped at the earlier entry, and the later one is stale then); once
// live is empty, entries is dropped (trim): stale entries never outlive the lane's last
// live key, and the map, which a Go map never shrinks, is replaced.
type replayLane struct {
	entries []string
	live    map[string]bool
}

func newReplayLane() replayLane { return replayLane{live: map[string]bool{}} }

// push appends a key that is not in the lane.
func (r *replayLane) push(key string) {
	r.entries = append(r.entries, key)
	r.live[key] = true
}

// remove takes key out of the lane (its entry stays, stale) and reports whether it was in.
func (r *replayLane) remove(key string) bool {
	if !r.live[key] {
		return false
	}
	delete(r.live, key)
	r.trim()
	return true
}

// pop removes and returns the first live key, dropping the stale entries before it; the
// lane must hold a live key (len above 0).
func (r *replayLane) pop() string {
	for {
		key := r.entries[0]
		r.entries[0] = ""
		r.entries = r.entries[1:]
		if r.live[key] {
			delete(r.live, key)
			r.trim()
			return key
		}
	}
}

// len is the number of live keys.
func (r *replayLane) len() int { return len(r.live) }

// trim drops the lane once nothing live is left in it: what remains are stale entries,
// and the map of a start-up replay would otherwise stay its size.
func (r *replayLane) trim() {
	if len(r.live) == 0 && len(r.entries) > 0 {
		r.entries, r.live = nil, map[string]bool{}
	}
}

// addMarks says which lane the next add of a key goes to. Invariants: replay holds keys
// whose next add is a replay (demote); urgent holds keys whose last add was urgent and not
// yet pushed or touched (promote; the key is being handled, the workqueue pushes it at
// Done), so a replay add meanwhile does not demote it. take consumes both at the add.
// A key in neither goes urgent.
type addMarks struct {
	replay map[string]bool
	urgent map[string]bool
}

func newAddMarks() addMarks { return addMarks{replay: map[string]bool{}, urgent: map[string]bool{}} }

// demote marks key's next add as a replay, unless an urgent add of it is pending.
func (m *addMarks) demote(key string) {
	if m.urgent[key] {
		return // an urgent add not pushed yet (the key is being handled) stays urgent
	}
	m.replay[key] = true
}

// promote marks key's next add as urgent, undoing a pending demote.
func (m *addMarks) promote(key string) {
	delete(m.replay, key)
	m.urgent[key] = true
}

// take consumes key's marks at its Push or Touch and reports whether the add is a replay.
func (m *addMarks) take(key string) (replay bool) {
	delete(m.urgent, key)
	if m.replay[key] {
		delete(m.replay, key)
		return true
	}
	return false
}

// replaySlots are the replayed keys being handled. Invariant: at most limit of them; a key
// taken from the urgent lane never holds one.
type replaySlots struct {
	busy  map[string]bool
	limit int
}

// newReplaySlots returns limit slots (at least one).
func newReplaySlots(limit int) replaySlots {
	return replaySlots{busy: map[string]bool{}, limit: max(limit, 1)}
}

func (s *replaySlots) take(key string) { s.busy[key] = true }

// release frees key's slot and reports whether it held one.
func (s *replaySlots) release(key string) bool {
	if !s.busy[key] {
		return false
	}
	delete(s.busy, key)
	return true
}

func (s *replaySlots) full() bool { return len(s.busy) >= s.limit }

func (s *replaySlots) len() int { return len(s.busy) }

// passLog records, while a replay pass runs, the keys taken from the urgent lane since it
// began: they were handled after the pass's snapshot, and the pass skips them. Invariant:
// keys is nil outside a pass (nothing is recorded).
type passLog struct{ keys map[string]struct{} }

// begin starts a pass, or lets one already begun go on.
func (p *passLog) begin() {
	if p.keys == nil {
		p.keys = map[string]struct{}{}
	}
}

func (p *passLog) end() { p.keys = nil }

// note records key when a pass runs.
func (p *passLog) note(key string) {
	if p.keys != nil {
		p.keys[key] = struct{}{}
	}
}

func (p *passLog) seen(key string) bool {
	_, ok := p.keys[key]
	return ok
}
