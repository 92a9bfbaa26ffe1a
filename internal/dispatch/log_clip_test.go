package dispatch_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// downOwner is a Forwarder whose every owner could not answer.
type downOwner struct{}

func (downOwner) Forward(context.Context, string, dispatch.Request) (dispatch.Answer, error) {
	return dispatch.Answer{}, errors.New("connection refused")
}

// elsewhereClusters is a dispatch.Clusters whose every cluster another replica owns.
type elsewhereClusters struct{}

func (elsewhereClusters) Attacher(name string) (*core.Attacher, error) {
	return nil, &dispatch.OwnedElsewhereError{Cluster: name, Owner: "10.0.0.2:9443", Identity: "b"}
}

// The names an event carries are the sender's, unchecked until its cluster's Attacher
// validates them: its log lines clip them past any valid name's length, so that a sender
// cannot make one event (3 MiB at most) log megabytes, here or at the replica it came in
// on when its owner could not answer; a valid name of 253 bytes is logged whole.
func TestAnEventsUntrustedNamesAreClippedInItsLogLines(t *testing.T) {
	big := strings.Repeat("a", 1<<20)
	for _, tt := range []struct {
		name string
		req  dispatch.Request
	}{
		{"a ReplicaSet event", dispatch.Request{Path: dispatch.PathHTTP, Options: core.DefaultOptions(),
			Event: core.Event{Cluster: big, Namespace: big, Name: big}}},
		{"a revision event", dispatch.Request{Path: dispatch.PathRevision, Options: core.DefaultOptions(),
			Revision: &core.RevisionEvent{Cluster: big, Kind: core.KindConfigMap, Namespace: big, Name: big}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var logs testfix.SyncBuffer
			d, err := dispatch.New(dispatch.Config{Clusters: elsewhereClusters{}, Forwarder: downOwner{},
				Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
			require.NoError(t, err)
			a := d.Dispatch(context.Background(), tt.req)
			assert.Equal(t, dispatch.ClassUnavailable, a.Class)
			assert.Less(t, len(logs.String()), 8<<10, "log bytes for one event of 3 MiB of names")
		})
	}
	t.Run("a valid name is whole", func(t *testing.T) {
		var logs testfix.SyncBuffer
		d, err := dispatch.New(dispatch.Config{Clusters: elsewhereClusters{}, Forwarder: downOwner{},
			Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
		require.NoError(t, err)
		long := strings.Repeat("r", 253)
		d.Dispatch(context.Background(), dispatch.Request{Path: dispatch.PathHTTP, Options: core.DefaultOptions(),
			Event: core.Event{Cluster: "prod", Namespace: "shop", Name: long}})
		assert.Contains(t, logs.String(), `"replicaSet":"`+long+`"`)
	})
}
