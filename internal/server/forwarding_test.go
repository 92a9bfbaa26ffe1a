package server

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

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

	a := newForwardClient(nil, []byte("s3cret")).Forward(ctx, lis.Addr().String(), req)
	assert.Equal(t, dispatch.ClassInvalid, a.Class, "the owner's answer: %v", a.Err)
	assert.Equal(t, "cluster", dispatch.FieldOf(a.Err))

	for _, token := range []string{"", "wrong"} {
		a = newForwardClient(nil, []byte(token)).Forward(ctx, lis.Addr().String(), req)
		assert.Equal(t, dispatch.ClassUnavailable, a.Class, "token %q: %v", token, a.Err)
		assert.Contains(t, a.Err.Error(), "401")
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
			a := newForwardClient(nil, nil).Forward(context.Background(), strings.TrimPrefix(owner.URL, "http://"),
				dispatch.Request{Path: dispatch.PathGRPC, Event: core.Event{Cluster: "prod", Namespace: "shop", Name: "web-1"}})
			assert.Equal(t, tt.wire.Class, a.Class)
			assert.Equal(t, tt.wantForbidden, a.Forbidden())
		})
	}
}
