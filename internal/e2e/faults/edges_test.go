package faults_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/argoproj/argo-events/pkg/sensors/triggers"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configmap-attacher/configmap-attacher/internal/event"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
)

// edge sends one event (the structured-mode CloudEvent Argo Events' resource EventSource
// emits) on one ingress path and returns "ok", "refused" (a safety rule: HTTP 409, gRPC
// FailedPrecondition, JetStream Term) or what else it got.
type edge struct {
	name string
	send func(t *testing.T, event []byte) string
}

func edges(t *testing.T, svc *service, b *bus) []edge {
	conn, err := grpc.NewClient(svc.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	trig := triggers.NewTriggerClient(conn)
	return []edge{
		{"http", func(t *testing.T, event []byte) string {
			resp, err := http.Post("http://"+svc.httpAddr+"/", "application/cloudevents+json", bytes.NewReader(event))
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			switch resp.StatusCode {
			case http.StatusOK:
				return "ok"
			case http.StatusConflict:
				return "refused"
			}
			return fmt.Sprintf("HTTP %d %s", resp.StatusCode, body)
		}},
		{"grpc", func(t *testing.T, event []byte) string {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			_, err := trig.Execute(ctx, &triggers.ExecuteRequest{Payload: event})
			switch status.Code(err) {
			case codes.OK:
				return "ok"
			case codes.FailedPrecondition:
				return "refused"
			}
			return err.Error()
		}},
		{"eventbus", func(t *testing.T, event []byte) string {
			results := []string{"ack", "ignored", "term", "nak"}
			count := func() map[string]float64 {
				out := map[string]float64{}
				for _, r := range results {
					v, err := svc.metric("configmap_attacher_eventbus_messages_total", map[string]string{"result": r})
					require.NoError(t, err)
					out[r] = v
				}
				return out
			}
			before := count()
			msg := &nats.Msg{Subject: "default.replicasets.replicaset-add", Data: event, Header: nats.Header{}}
			msg.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("%d", time.Now().UnixNano()))
			_, err := b.js.PublishMsg(context.Background(), msg)
			require.NoError(t, err)
			var got string
			controlplane.Eventually(t, 60*time.Second, "the message to be answered", func() error {
				after := count()
				for _, r := range results {
					if after[r] > before[r] {
						got = r
						return nil
					}
				}
				return fmt.Errorf("not answered yet")
			})
			switch got {
			case "ack":
				return "ok"
			case "term":
				return "refused"
			}
			return got
		}},
	}
}

// TestDuplicateReorderedStaleEvents sends, on each edge (HTTP receiver, gRPC trigger,
// EventBus), the events that go wrong in practice: the new revision's ADD before the old
// one's (both share a ConfigMap), the same ADD again, an ADD for a ReplicaSet deleted in
// the meantime (sent right after the delete returns, so the service's cache may still
// hold it), and, once a ReplicaSet of the same name is recreated with a new UID, the old
// ADD again. Checked: each answer; the apiserver's PATCH count per step (0 for every
// duplicate and every stale event); no ConfigMap ever owned by the deleted UID (a watch
// sees every intermediate state); nothing deleted; the final owners exact. The ConfigMaps
// are owned by a ReplicaSet already (keeper): the revision side attaches a revision's
// first use from the cache without any event (docs/design.md, "First use"), and the
// events are what is tested here.
func TestDuplicateReorderedStaleEvents(t *testing.T) {
	b := newBus(t)
	svc := startService(t, b)
	api := newAPIRequests(t)
	for _, e := range edges(t, svc, b) {
		t.Run(e.name, func(t *testing.T) {
			ns, kc := newNamespace(t, "edges-"+e.name)
			ctx := context.Background()
			for _, cm := range []string{"cm-shared", "cm-1", "cm-2", "cm-s"} {
				require.NoError(t, createConfigMap(ctx, kc, ns, cm))
			}
			owners := watchOwners(t, kc, ns)
			create := func(name string, cms ...string) *appsv1.ReplicaSet {
				rs, err := kc.AppsV1().ReplicaSets(ns).Create(ctx, replicaSet(name, cms...), metav1.CreateOptions{})
				require.NoError(t, err)
				return rs
			}
			keeper := create("keeper", "cm-shared", "cm-1", "cm-2", "cm-s")
			controlplane.Eventually(t, 10*time.Second, "the keeper's first use attached", func() error {
				for _, cm := range []string{"cm-shared", "cm-1", "cm-2", "cm-s"} {
					if !owners.everOwnedBy(cm, keeper.UID) {
						return fmt.Errorf("%s not owned by the keeper yet", cm)
					}
				}
				return nil
			})
			rs1, rs2 := create("web-1", "cm-1", "cm-shared"), create("web-2", "cm-2", "cm-shared")
			oldS := create("stale", "cm-s")
			var newS *appsv1.ReplicaSet
			add := func(rs func() *appsv1.ReplicaSet) func() []byte {
				return func() []byte {
					_, body, err := event.ResourceEvent("replicasets", "replicaset-add", "ADD", rs(), map[string]string{})
					require.NoError(t, err)
					return body
				}
			}
			bare := func(name string) func() []byte { // an event without a UID
				return add(func() *appsv1.ReplicaSet {
					return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
				})
			}
			is := func(rs *appsv1.ReplicaSet) func() *appsv1.ReplicaSet { return func() *appsv1.ReplicaSet { return rs } }
			steps := []struct {
				name    string
				before  func()
				event   func() []byte
				want    string
				patches int
			}{
				{name: "the new revision's ADD first", event: add(is(rs2)), want: "ok", patches: 2},
				// web-2's attach made every user of cm-shared an owner (web-1 too, in the same
				// PATCH: docs/safety.md), so web-1's own ADD writes only cm-1.
				{name: "then the old revision's", event: add(is(rs1)), want: "ok", patches: 1},
				{name: "the same ADD again", event: add(is(rs1)), want: "ok"},
				{name: "and once more, for the other", event: add(is(rs2)), want: "ok"},
				{name: "a duplicate without a UID", event: bare("web-1"), want: "ok"},
				{name: "ADD for a ReplicaSet deleted a moment ago", before: func() {
					require.NoError(t, kc.AppsV1().ReplicaSets(ns).Delete(ctx, oldS.Name, metav1.DeleteOptions{}))
				}, event: add(is(oldS)), want: "refused"},
				{name: "the same, without a UID", event: bare("stale"), want: "refused"},
				{name: "the old ADD after a recreate with a new UID", before: func() {
					newS = create("stale", "cm-s")
					require.NotEqual(t, oldS.UID, newS.UID)
				}, event: add(is(oldS)), want: "refused"},
				{name: "the new ReplicaSet's ADD", event: add(func() *appsv1.ReplicaSet { return newS }), want: "ok", patches: 1},
				{name: "the old ADD once more", event: add(is(oldS)), want: "refused"},
				{name: "the new ADD duplicated", event: add(func() *appsv1.ReplicaSet { return newS }), want: "ok"},
			}
			deletes0 := api.count(t, "DELETE", "configmaps", "")
			writes := 0
			for _, st := range steps {
				if st.before != nil {
					st.before()
				}
				p0 := api.count(t, "PATCH", "configmaps", "")
				got := e.send(t, st.event())
				p := api.count(t, "PATCH", "configmaps", "") - p0
				writes += p
				assert.Equal(t, st.want, got, "%s: answer", st.name)
				assert.Equal(t, st.patches, p, "%s: PATCHes", st.name)
			}
			k := keeper.UID
			want := map[string][]types.UID{"cm-shared": {k, rs2.UID, rs1.UID}, "cm-1": {k, rs1.UID}, "cm-2": {k, rs2.UID}, "cm-s": {k, newS.UID}}
			for name, uids := range want {
				cm, err := kc.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
				require.NoError(t, err, "%s was not deleted", name)
				var got []types.UID
				for _, o := range cm.OwnerReferences {
					got = append(got, o.UID)
					assert.False(t, o.Controller != nil && *o.Controller, "%s: controller is false", name)
				}
				assert.ElementsMatch(t, uids, got, "%s: owners", name)
			}
			controlplane.Eventually(t, 10*time.Second, "the watch to see cm-s attached", func() error {
				if !owners.everOwnedBy("cm-s", newS.UID) {
					return fmt.Errorf("not yet")
				}
				return nil
			})
			assert.False(t, owners.everOwnedBy("cm-s", oldS.UID), "cm-s was never owned by the deleted ReplicaSet")
			assert.Zero(t, owners.deletions(), "no ConfigMap deleted")
			assert.Equal(t, deletes0, api.count(t, "DELETE", "configmaps", ""), "no DELETE of a ConfigMap")
			_, twice, _ := owners.summary()
			t.Logf("%s: %d events, %d PATCHes (2+1+1 from the 3 attaching events; 0 from the 4 duplicates and the 4 stale events), ConfigMaps whose owners changed more than once: %d (each: the keeper's attach, then the events')",
				e.name, len(steps), writes, twice)
		})
	}
}
