package shard

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"slices"
)

// Assignment is the fleet's agreed holder of each shard for one set of live members: a
// pure function of that set and the number of shards (Assign), so that every replica
// computes the same one with no coordination; the shard Leases stay the only fencing
// (docs/design.md, "Fleet").
type Assignment struct {
	// Preferred is, per shard, the member that holds it once the fleet has settled.
	Preferred []string
	// Standby is, per shard, the member that would be preferred if the preferred one
	// left ("" with a single member): it contends for the shard while a member holds it,
	// so that a failover lands where the assignment settles, with no second move.
	Standby []string
}

// Top returns shard i's preferred member and its standby, when it has one.
func (a Assignment) Top(i int) []string {
	if a.Standby[i] == "" {
		return a.Preferred[i : i+1]
	}
	return []string{a.Preferred[i], a.Standby[i]}
}

// Assign spreads shards over members (in any order, duplicates ignored) with rendezvous
// hashing under balanced loads: every (shard, member) pair has a rendezvous score, and
// the pairs are taken from the highest score down, a shard going to the member of the
// pair unless it is taken already or the member is full. A member is full at
// floor(shards/N) shards, or at one more for the first shards mod N members to reach it,
// so the loads differ by at most one and every shard gets a member. This greedy by
// descending weight gives the stable matching of shards and members for the loads it
// ends with: no shard and member both score each other higher than what they got. A
// member joining or leaving moves the shards it takes or held and a few more, as every
// member's load changes (measured in assignment_test.go; docs/design.md, "Fleet").
func Assign(members []string, shards int) Assignment {
	ids := slices.Compact(slices.Sorted(slices.Values(members)))
	a := Assignment{Preferred: make([]string, max(shards, 0)), Standby: make([]string, max(shards, 0))}
	if len(ids) == 0 || shards <= 0 {
		return a
	}
	pairs := byScore(ids, shards)
	preferred := greedy(pairs, len(ids), shards, -1)
	for i, k := range preferred {
		a.Preferred[i] = ids[k]
	}
	if len(ids) == 1 {
		return a
	}
	for k := range ids {
		without := greedy(pairs, len(ids), shards, k)
		for i, p := range preferred {
			if p == k {
				a.Standby[i] = ids[without[i]]
			}
		}
	}
	return a
}

// pair is member (an index into the sorted members) for shard, with its score.
type pair struct {
	score         uint64
	shard, member int
}

// byScore returns every (shard, member) pair, highest score first; ties (never seen
// with 64-bit scores) go to the lower shard, then the lower member.
func byScore(ids []string, shards int) []pair {
	pairs := make([]pair, 0, len(ids)*shards)
	for i := range shards {
		for k, id := range ids {
			pairs = append(pairs, pair{score: score(i, id), shard: i, member: k})
		}
	}
	slices.SortFunc(pairs, func(x, y pair) int {
		return cmp.Or(cmp.Compare(y.score, x.score), cmp.Compare(x.shard, y.shard), cmp.Compare(x.member, y.member))
	})
	return pairs
}

// greedy assigns each shard a member index from pairs (highest score first) under
// balanced loads, over the n members but gone (-1: none); see Assign.
func greedy(pairs []pair, n, shards, gone int) []int {
	live := n
	if gone >= 0 {
		live--
	}
	quota, extra := shards/live, shards%live
	load := make([]int, n)
	out := make([]int, shards)
	for i := range out {
		out[i] = -1
	}
	left := shards
	for _, p := range pairs {
		if left == 0 {
			break
		}
		if p.member == gone || out[p.shard] >= 0 {
			continue
		}
		switch l := load[p.member]; {
		case l < quota:
		case l == quota && extra > 0:
			extra--
		default:
			continue
		}
		load[p.member]++
		out[p.shard] = p.member
		left--
	}
	return out
}

// score is the rendezvous weight of member id for shard i.
func score(i int, id string) uint64 {
	h := fnv.New64a()
	_, _ = fmt.Fprintf(h, "%d/%s", i, id)
	return mix(h.Sum64())
}

// mix is a 64-bit finaliser (SplitMix64's), so that nearby inputs spread.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ (x >> 31)
}
