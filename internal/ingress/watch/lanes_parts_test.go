package watch

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The urgent lane hands keys out in the order they were pushed.
func TestFifoHandsKeysOutInPushOrder(t *testing.T) {
	cases := []struct {
		name   string
		push   []string
		pops   int
		want   []string
		wantLn int
	}{
		{"empty", nil, 0, nil, 0},
		{"one in, one out", []string{"a"}, 1, []string{"a"}, 0},
		{"first in, first out", []string{"a", "b", "c"}, 2, []string{"a", "b"}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var f fifo
			for _, k := range tc.push {
				f.push(k)
			}
			var got []string
			for range tc.pops {
				got = append(got, f.pop())
			}
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.wantLn, f.len())
		})
	}
}

// replayOp is one operation on a replay lane: push, remove or pop a key.
type replayOp struct{ op, key string }

// The replay lane hands out its live keys in push order, skips keys removed from it,
// counts only live keys and drops its stale entries once no live key is left.
func TestReplayLaneKeepsLiveKeysInOrder(t *testing.T) {
	cases := []struct {
		name        string
		ops         []replayOp
		wantPops    []string
		wantRemoved []bool
		wantLen     int
		wantEntries int
	}{
		{"push then pop in order", []replayOp{{"push", "a"}, {"push", "b"}, {"pop", ""}, {"pop", ""}},
			[]string{"a", "b"}, nil, 0, 0},
		{"a removed key is skipped", []replayOp{{"push", "a"}, {"push", "b"}, {"remove", "a"}, {"pop", ""}},
			[]string{"b"}, []bool{true}, 0, 0},
		{"removing a key not in the lane does nothing", []replayOp{{"push", "a"}, {"remove", "x"}},
			nil, []bool{false}, 1, 1},
		{"a stale entry stays while a live key is left", []replayOp{{"push", "a"}, {"push", "b"}, {"remove", "b"}},
			nil, []bool{true}, 1, 2},
		{"removing the last live key drops the stale entries", []replayOp{{"push", "a"}, {"push", "b"}, {"remove", "a"}, {"remove", "b"}},
			nil, []bool{true, true}, 0, 0},
		{"a key pushed again after its removal is popped at its first entry",
			[]replayOp{{"push", "a"}, {"push", "b"}, {"remove", "a"}, {"push", "a"}, {"pop", ""}, {"pop", ""}},
			[]string{"a", "b"}, []bool{true}, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newReplayLane()
			var pops []string
			var removed []bool
			for _, o := range tc.ops {
				switch o.op {
				case "push":
					r.push(o.key)
				case "remove":
					removed = append(removed, r.remove(o.key))
				case "pop":
					pops = append(pops, r.pop())
				}
			}
			assert.Equal(t, tc.wantPops, pops)
			assert.Equal(t, tc.wantRemoved, removed)
			assert.Equal(t, tc.wantLen, r.len())
			assert.Len(t, r.entries, tc.wantEntries)
		})
	}
}

// An add's lane is its marks': a replay add (demote) goes to the replay lane unless an
// urgent add of the key is pending; an urgent add (promote) undoes a pending demote;
// the marks are consumed by the add they describe, and an unmarked add (a retry) is urgent.
func TestAddMarksDecideTheLaneOfTheNextAdd(t *testing.T) {
	cases := []struct {
		name       string
		marks      func(m *addMarks)
		wantReplay bool
	}{
		{"unmarked (a retry) is urgent", func(*addMarks) {}, false},
		{"demoted is a replay", func(m *addMarks) { m.demote("k") }, true},
		{"promoted is urgent", func(m *addMarks) { m.promote("k") }, false},
		{"promote undoes a demote", func(m *addMarks) { m.demote("k"); m.promote("k") }, false},
		{"a demote after a pending promote stays urgent", func(m *addMarks) { m.promote("k"); m.demote("k") }, false},
		{"marks of another key do not count", func(m *addMarks) { m.demote("other") }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := newAddMarks()
			tc.marks(&m)
			assert.Equal(t, tc.wantReplay, m.take("k"))
			assert.False(t, m.take("k"), "the marks are consumed by the add")
		})
	}
}

// At most limit replayed keys hold a slot; releasing frees only a slot that was held.
func TestReplaySlotsBoundTheReplayInProgress(t *testing.T) {
	cases := []struct {
		name        string
		limit       int
		take        []string
		release     string
		wantRelease bool
		wantFull    bool
		wantLen     int
	}{
		{"a zero limit is one slot", 0, []string{"a"}, "", false, true, 1},
		{"below the limit", 2, []string{"a"}, "", false, false, 1},
		{"at the limit", 2, []string{"a", "b"}, "", false, true, 2},
		{"releasing a held slot frees it", 2, []string{"a", "b"}, "a", true, false, 1},
		{"releasing an urgent key frees nothing", 2, []string{"a", "b"}, "u", false, true, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newReplaySlots(tc.limit)
			for _, k := range tc.take {
				s.take(k)
			}
			assert.Equal(t, tc.wantRelease, s.release(tc.release))
			assert.Equal(t, tc.wantFull, s.full())
			assert.Equal(t, tc.wantLen, s.len())
		})
	}
}

// The pass log records urgent keys only while a pass runs; a begin during a pass keeps it.
func TestPassLogRecordsOnlyDuringAPass(t *testing.T) {
	cases := []struct {
		name string
		ops  func(p *passLog)
		want bool
	}{
		{"outside a pass nothing is recorded", func(p *passLog) { p.note("k") }, false},
		{"noted during a pass", func(p *passLog) { p.begin(); p.note("k") }, true},
		{"a second begin keeps the pass", func(p *passLog) { p.begin(); p.note("k"); p.begin() }, true},
		{"end forgets the pass", func(p *passLog) { p.begin(); p.note("k"); p.end() }, false},
		{"a new pass starts afresh", func(p *passLog) { p.begin(); p.note("k"); p.end(); p.begin() }, false},
		{"another key is not seen", func(p *passLog) { p.begin(); p.note("other") }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var p passLog
			tc.ops(&p)
			assert.Equal(t, tc.want, p.seen("k"))
		})
	}
}

// lanesOp is one call on lanes as the workqueue and the watcher make them.
type lanesOp struct{ op, key string }

func (o lanesOp) apply(l *lanes) string {
	switch o.op {
	case "demote":
		l.demote(o.key)
	case "promote":
		l.promote(o.key)
	case "push":
		l.Push(o.key)
	case "touch":
		l.Touch(o.key)
	case "done":
		l.replayDone(o.key)
	case "pop":
		return l.Pop()
	}
	return ""
}

// Push, Touch, Pop, Len and replayDone, called directly as the workqueue calls them: the
// lane of a Push is its mark's, a Touch moves a replayed key urgent only for an urgent
// add, Pop takes urgent keys first, and Len hides the replay lane while its slots are full.
func TestLanesQueueOperations(t *testing.T) {
	cases := []struct {
		name     string
		ops      []lanesOp
		wantPops []string
		wantLen  int
		backlog  int
	}{
		{"an unmarked push is urgent", []lanesOp{{"push", "a"}}, nil, 1, 0},
		{"a demoted push is a replay", []lanesOp{{"demote", "a"}, {"push", "a"}}, nil, 1, 1},
		{"pop takes urgent first", []lanesOp{{"demote", "r"}, {"push", "r"}, {"push", "u"}, {"pop", ""}},
			[]string{"u"}, 1, 1},
		{"an urgent touch moves a replayed key", []lanesOp{{"demote", "r"}, {"push", "r"}, {"demote", "s"}, {"push", "s"},
			{"promote", "s"}, {"touch", "s"}, {"pop", ""}}, []string{"s"}, 1, 1},
		{"a replay touch leaves the key", []lanesOp{{"demote", "r"}, {"push", "r"}, {"demote", "r"}, {"touch", "r"}},
			nil, 1, 1},
		{"a touch of an urgent key changes nothing", []lanesOp{{"push", "u"}, {"promote", "u"}, {"touch", "u"}}, nil, 1, 0},
		{"full slots hide the replay lane", []lanesOp{{"demote", "r1"}, {"push", "r1"}, {"demote", "r2"}, {"push", "r2"},
			{"demote", "r3"}, {"push", "r3"}, {"pop", ""}, {"pop", ""}}, []string{"r1", "r2"}, 0, 3},
		{"replayDone frees a slot", []lanesOp{{"demote", "r1"}, {"push", "r1"}, {"demote", "r2"}, {"push", "r2"},
			{"demote", "r3"}, {"push", "r3"}, {"pop", ""}, {"pop", ""}, {"done", "r1"}}, []string{"r1", "r2"}, 1, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := newLanes(2)
			var pops []string
			for _, o := range tc.ops {
				if k := o.apply(l); k != "" {
					pops = append(pops, k)
				}
			}
			assert.Equal(t, tc.wantPops, pops)
			assert.Equal(t, tc.wantLen, l.Len())
			assert.Equal(t, tc.backlog, l.backlog())
		})
	}
}

// waitRoom lets a pass go on while the replay backlog is below its depth, and never once
// its context has ended; a freed slot wakes it.
func TestWaitRoomWaitsForTheBacklog(t *testing.T) {
	cases := []struct {
		name      string
		queued    int
		depth     int
		cancelled bool
		want      bool
	}{
		{"room", 1, 2, false, true},
		{"no room, context ended", 2, 2, true, false},
		{"room, context ended", 0, 2, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := newLanes(4)
			for i := range tc.queued {
				lanesOp{"demote", string(rune('a' + i))}.apply(l)
				lanesOp{"push", string(rune('a' + i))}.apply(l)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancelled {
				cancel()
			}
			assert.Equal(t, tc.want, l.waitRoom(ctx, tc.depth))
		})
	}
	t.Run("a freed slot wakes a waiting pass", func(t *testing.T) {
		l := newLanes(1)
		lanesOp{"demote", "a"}.apply(l)
		lanesOp{"push", "a"}.apply(l)
		assert.Equal(t, "a", l.Pop())
		got := make(chan bool, 1)
		go func() { got <- l.waitRoom(context.Background(), 1) }()
		l.replayDone("a")
		assert.True(t, <-got)
	})
}
