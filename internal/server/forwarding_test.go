package server

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

type noClusters struct{}

func (noClusters) Attacher(name string) (*core.Attacher, error) {
	return nil, core.Invalidf("cluster", "unknown cluster %q", name)
}

// The forwarding endpoint answers only a replica that carries the service's bearer
// token; its answer keeps its class and field on the forwarding side; an owner that
// refuses the credentials is a retry-later answer, never a lost event.
func TestForwardingIsAuthenticatedAndKeepsTheAnswersClass(t *testing.T) {
	d, err := dispatch.New(dispatch.Config{Clusters: noClusters{}, Logger: testfix.Quiet()})
	require.NoError(t, err)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := newForwardServer(lis, d, nil, []byte("s3cret"), nil, testfix.Quiet())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	defer func() { cancel(); <-done }()
	req := dispatch.Request{Path: dispatch.PathEventBus, Options: core.DefaultOptions(),
		Event: core.Event{Cluster: "prod", Namespace: "shop", Name: "web-1"}}

	a, err := newForwardClient(nil, []byte("s3cret")).Forward(ctx, lis.Addr().String(), req)
	require.NoError(t, err)
	assert.Equal(t, dispatch.ClassInvalid, a.Class, "the owner's answer: %v", a.Err)
	assert.Equal(t, "cluster", dispatch.FieldOf(a.Err))

	for _, token := range []string{"", "wrong"} {
		_, err = newForwardClient(nil, []byte(token)).Forward(ctx, lis.Addr().String(), req)
		require.Error(t, err, "token %q: the owner gave no answer", token)
		assert.Contains(t, err.Error(), "401")
	}
}

// An owner's "permission denied" (RBAC refused the write) crosses the wire as such: the
// replica the event came in on answers it 403 / PermissionDenied like a local one.
func TestAForwardedPermissionDeniedStaysPermissionDenied(t *testing.T) {
	for _, tt := range []struct {
		name          string
		wire          wireAnswer
		wantForbidden bool
	}{
		{"RBAC refused", wireAnswer{Class: dispatch.ClassPermanent, Error: "forbidden", Forbidden: true}, true},
		{"another permanent failure", wireAnswer{Class: dispatch.ClassPermanent, Error: "immutable"}, false},
		{"forbidden on a class that is not permanent is ignored", wireAnswer{Class: dispatch.ClassBusy, Forbidden: true}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			owner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				_ = json.NewEncoder(w).Encode(tt.wire)
			}))
			defer owner.Close()
			a, err := newForwardClient(nil, nil).Forward(context.Background(), strings.TrimPrefix(owner.URL, "http://"),
				dispatch.Request{Path: dispatch.PathGRPC, Event: core.Event{Cluster: "prod", Namespace: "shop", Name: "web-1"}})
			require.NoError(t, err)
			assert.Equal(t, tt.wire.Class, a.Class)
			assert.Equal(t, tt.wantForbidden, a.Forbidden())
		})
	}
}

// ownedBy is a dispatch.Clusters whose every cluster another replica owns.
type ownedBy dispatch.OwnedElsewhereError

func (o ownedBy) Attacher(string) (*core.Attacher, error) {
	oe := dispatch.OwnedElsewhereError(o)
	return nil, &oe
}

// runOwner runs a forwarding endpoint on loopback answering with token and returns its
// address (its dispatcher serves no cluster: every answer is "unknown cluster").
func runOwner(t *testing.T, token string) string {
	t.Helper()
	d, err := dispatch.New(dispatch.Config{Clusters: noClusters{}, Logger: testfix.Quiet()})
	require.NoError(t, err)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- newForwardServer(lis, d, nil, []byte(token), nil, testfix.Quiet()).Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return lis.Addr().String()
}

// An event whose owner could not answer (not reached, timed out, refusing this
// replica's token, or none at the moment) is answered retry-later and logged by the
// replica it came in on, once, as a warning naming the cluster, the owner's identity and
// address and the cause, never the token. An owner that answers is logged there, not here.
func TestAForwardTheOwnerCouldNotAnswerIsLoggedWhereTheEventCameIn(t *testing.T) {
	const token = "s3cret-token"
	gone, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	refused := gone.Addr().String()
	require.NoError(t, gone.Close())
	release := make(chan struct{})
	hung := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
	defer func() { close(release); hung.Close() }()
	for _, tt := range []struct {
		name, owner string
		want        dispatch.Class
		cause       string // in the warning; "" for no warning
	}{
		{"connection refused", refused, dispatch.ClassUnavailable, "connection refused"},
		{"timeout", strings.TrimPrefix(hung.URL, "http://"), dispatch.ClassDeadline, "deadline exceeded"},
		{"the owner refuses this replica's token", runOwner(t, "another-token"), dispatch.ClassUnavailable, "HTTP 401"},
		{"no owner at the moment", "", dispatch.ClassUnavailable, "no replica owns it at the moment"},
		{"the owner answers", runOwner(t, token), dispatch.ClassInvalid, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var logs testfix.SyncBuffer
			d, err := dispatch.New(dispatch.Config{
				Clusters:  ownedBy{Cluster: "prod", Owner: tt.owner, Identity: "configmap-attacher-7d9f-b"},
				Forwarder: newForwardClient(nil, []byte(token)), ExecuteTimeout: 300 * time.Millisecond,
				Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
			require.NoError(t, err)
			a := d.Dispatch(context.Background(), dispatch.Request{Path: dispatch.PathHTTP, Options: core.DefaultOptions(),
				Event: core.Event{Cluster: "prod", Namespace: "shop", Name: "web-1"}})
			assert.Equal(t, tt.want, a.Class, "%v", a.Err)

			lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
			assert.NotContains(t, logs.String(), token)
			if tt.cause == "" {
				assert.Empty(t, strings.TrimSpace(logs.String()), "the owner answered: it logs the event, not this replica")
				return
			}
			require.Len(t, lines, 1, "one line per failed event:\n%s", logs.String())
			var line map[string]any
			require.NoError(t, json.Unmarshal([]byte(lines[0]), &line))
			assert.Equal(t, "WARN", line["level"])
			assert.Contains(t, line["err"], tt.cause)
			assert.Equal(t, "web-1", line["replicaSet"])
			if tt.owner == "" { // the event's own line: no owner to name, the cause names the cluster
				assert.Contains(t, line["err"], `cluster "prod"`)
				return
			}
			assert.Equal(t, "prod", line["cluster"])
			assert.Equal(t, "configmap-attacher-7d9f-b", line["owner"])
			assert.Equal(t, tt.owner, line["ownerAddress"])
		})
	}
}
