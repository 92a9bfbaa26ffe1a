package cluster

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// fakeOwnership owns the clusters in owned; the others are owned at "10.0.0.9:9443".
type fakeOwnership struct {
	mu     sync.Mutex
	owned  map[string]bool
	notify func(context.Context)
}

func (f *fakeOwnership) Notify(fn func(context.Context)) { f.notify = fn }
func (f *fakeOwnership) Owns(name string, _ int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.owned[name]
}
func (f *fakeOwnership) Owner(name string, pin int) (identity, address string) {
	if f.Owns(name, pin) {
		return "self", "10.0.0.8:9443"
	}
	return "replica-1", "10.0.0.9:9443"
}
func (f *fakeOwnership) set(name string, v bool) {
	f.mu.Lock()
	f.owned[name] = v
	f.mu.Unlock()
	f.notify(context.Background())
}

// A replica runs the runtime of the clusters it owns only; an event for another is
// routed to its owner (never an unknown cluster), and ownership moving starts and
// stops runtimes as a unit.
func TestOnlyOwnedClustersRunAndTheOthersAreRoutedToTheirOwner(t *testing.T) {
	dead := &rest.Config{Host: "https://127.0.0.1:1"}
	own := &fakeOwnership{owned: map[string]bool{"a": true}}
	r, err := New(Options{Clusters: []Spec{{Name: "a", Source: SourceHome, Config: dead}, {Name: "b", Source: SourceKubeconfig, Config: dead}},
		Ownership: own, ProbeInterval: time.Hour, Logger: testfix.Quiet()})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() { cancel(); require.NoError(t, <-done) }()
	require.Eventually(t, func() bool { return len(r.Owned()) == 1 }, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, []string{"a"}, r.Owned())

	_, err = r.Attacher("b")
	var oe *dispatch.OwnedElsewhereError
	require.True(t, errors.As(err, &oe), "cluster b: %v", err)
	assert.Equal(t, "10.0.0.9:9443", oe.Owner)
	assert.Equal(t, "replica-1", oe.Identity)
	_, err = r.Attacher("nope")
	assert.ErrorIs(t, err, core.ErrInvalid, "an unknown cluster stays invalid")

	own.set("b", true)
	own.set("a", false)
	assert.Equal(t, []string{"b"}, r.Owned(), "ownership moved: a stopped, b started")
	_, err = r.Attacher("a")
	require.True(t, errors.As(err, &oe), "cluster a once released: %v", err)
	for _, st := range r.Statuses() {
		assert.Equal(t, st.Name == "a", st.Elsewhere, "status of %s", st.Name)
		assert.True(t, st.Name != "a" || st.Healthy, "a cluster owned elsewhere does not make this replica unready")
	}
}
