package cluster

import (
	"context"
	"testing"
)

// Cluster start-ups are bounded: past the bound a start-up waits for a release, a
// release frees its one slot however often it is called, a stopped start-up takes none,
// and a nil bound never waits.
func TestStartupsBoundConcurrentStartups(t *testing.T) {
	tests := []struct {
		name     string
		bound    *Startups
		hold     int  // start-ups acquired and held
		releases int  // times the first one's release is called
		wantNext bool // a further start-up gets a slot at once
	}{
		{name: "below the bound: starts at once", bound: NewStartups(2), hold: 1, wantNext: true},
		{name: "at the bound: waits", bound: NewStartups(2), hold: 2, wantNext: false},
		{name: "a release frees a slot", bound: NewStartups(2), hold: 2, releases: 1, wantNext: true},
		{name: "a release called twice frees one slot", bound: NewStartups(3), hold: 3, releases: 2, wantNext: false},
		{name: "no bound", bound: nil, hold: 100, wantNext: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var rels []func()
			for range tc.hold {
				rel, ok := tc.bound.acquire(context.Background())
				if !ok {
					t.Fatal("a start-up below the bound did not get a slot")
				}
				rels = append(rels, rel)
			}
			for range tc.releases {
				rels[0]()
			}
			if tc.releases == 2 {
				// The double release freed one slot only: this acquire takes it, and the
				// next one waits.
				if _, ok := tc.bound.acquire(context.Background()); !ok {
					t.Fatal("no slot after a release")
				}
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // acquire answers at once: a free slot, or ctx ended while waiting
			_, got := tc.bound.acquire(ctx)
			if got != tc.wantNext {
				t.Fatalf("next start-up got a slot: %v, want %v", got, tc.wantNext)
			}
		})
	}
}
