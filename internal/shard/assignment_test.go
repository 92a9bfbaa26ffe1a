package shard

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes/fake"
)

func TestAClustersShardIsStableAndHonoursArgoCDsPin(t *testing.T) {
	tests := []struct {
		name   string
		pin    int
		shards int
		want   int
	}{
		{name: "pinned", pin: 3, shards: 16, want: 3},
		{name: "pin zero", pin: 0, shards: 16, want: 0},
		{name: "pin out of range is ignored", pin: 16, shards: 16, want: Of("prod-eu", -1, 16)},
		{name: "no pin: hashed", pin: -1, shards: 16, want: Of("prod-eu", -1, 16)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Of("prod-eu", tt.pin, tt.shards))
		})
	}
	for i := range 100 {
		name := fmt.Sprint("cluster-", i)
		s := Of(name, -1, 16)
		require.True(t, s >= 0 && s < 16)
		assert.Equal(t, s, Of(name, -1, 16), "the same name maps to the same shard")
	}
}

func TestClustersSpreadOverTheShards(t *testing.T) {
	counts := make([]int, 16)
	for i := range 1000 {
		counts[Of(fmt.Sprint("cluster-", i), -1, 16)]++
	}
	for s, n := range counts {
		assert.Greater(t, n, 30, "shard %d has %d of 1000 clusters", s, n)
	}
}

// A member joining takes about 1/N of the shards, and only from the others to itself;
// a member leaving hands only its own shards on (rendezvous hashing).
func TestAMemberJoiningOrLeavingMovesAboutOneNthOfTheShards(t *testing.T) {
	const shards = 2000
	three := []string{"r-a", "r-b", "r-c"}
	four := append([]string{"r-d"}, three...)
	moved := 0
	for i := range shards {
		before, after := ranked(i, three, 1)[0], ranked(i, four, 1)[0]
		if before != after {
			moved++
			assert.Equal(t, "r-d", after, "a shard moved to a member other than the one that joined")
		}
	}
	assert.InDelta(t, 0.25, float64(moved)/shards, 0.05, "share of shards moved when a fourth member joins")
	for i := range shards {
		before, after := ranked(i, four, 1)[0], ranked(i, three, 1)[0]
		if before != "r-d" {
			assert.Equal(t, before, after, "a shard of a member that stayed moved when another left")
		}
	}
}

func TestTheFirstTwoRankedAreDistinctAndAgreeOnEveryReplica(t *testing.T) {
	members := []string{"r-a", "r-b", "r-c"}
	reversed := []string{"r-c", "r-b", "r-a"}
	for i := range 64 {
		top := ranked(i, members, 2)
		require.Len(t, top, 2)
		assert.NotEqual(t, top[0], top[1])
		assert.Equal(t, top, ranked(i, reversed, 2), "the order members are listed in does not matter")
	}
	assert.Equal(t, []string{"r-a"}, ranked(0, []string{"r-a"}, 2))
}

func TestOptionsRefuseWhatCannotFence(t *testing.T) {
	base := func() Options {
		return Options{Client: fake.NewClientset(), Namespace: "ns", Address: "10.0.0.1:9443", Identity: "pod-a"}
	}
	tests := []struct {
		name   string
		change func(*Options)
		want   string
	}{
		{name: "no client", change: func(o *Options) { o.Client = nil }, want: "need a Client"},
		{name: "renew deadline not shorter than the lease", change: func(o *Options) {
			o.LeaseDuration, o.RenewDeadline = 10*time.Second, 10*time.Second
		}, want: "must be shorter"},
		{name: "identity not a Lease name", change: func(o *Options) { o.Identity = "Pod_A" }, want: "valid Lease name"},
		{name: "defaults", change: func(*Options) {}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := base()
			tt.change(&o)
			err := o.defaults()
			if tt.want == "" {
				require.NoError(t, err)
				assert.Less(t, o.RenewDeadline, o.LeaseDuration)
				assert.Equal(t, DefaultShards, o.Shards)
				return
			}
			require.ErrorContains(t, err, tt.want)
		})
	}
}
