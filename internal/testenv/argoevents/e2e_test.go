package argoevents_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configmap-attacher/configmap-attacher/internal/server"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/argoevents"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
)

// TestEndToEnd is the proof with the real Argo Events: local control plane (with its real
// garbage collector), NATS JetStream, the real eventsource-service running the shipped
// EventSource, the real sensor-service running a shipped Sensor, and configmap-attacher
// in-process. A Rollout-owned ReplicaSet that uses an opted-in ConfigMap gets it
// attached within seconds; deleting the ReplicaSet lets the garbage collector delete it.
// The same holds for a ReplicaSet the real deployment controller makes for a Deployment.
func TestEndToEnd(t *testing.T) {
	tests := []struct {
		name   string
		sensor string
		// point aims the loaded Sensor at the in-process server.
		point func(t *testing.T, e *env) error
	}{
		{name: "gRPC custom trigger", sensor: argoevents.GRPCSensorFile, point: pointGRPC},
		{name: "HTTP trigger", sensor: argoevents.HTTPSensorFile, point: pointHTTP},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			s := e.sensor(tc.sensor)
			if err := tc.point(t, e); err != nil {
				t.Fatal(err)
			}
			e.start(argoevents.Config{EventSource: e.eventSource()}, eventSourceReady)
			e.start(argoevents.Config{Sensor: e.aim(s)}, sensorReady)

			// A Rollout-owned ReplicaSet (no Argo Rollouts controller runs: the test plays it).
			cm := e.createRevision("app-config-1")
			created := time.Now()
			rs := e.createRolloutReplicaSet("app", cm.Name)
			e.waitOwned(cm.Name, rs.Name, rs.UID)
			t.Logf("rollout: attached %s after the ReplicaSet was created", time.Since(created).Round(time.Millisecond))
			deleted := time.Now()
			if err := e.kube.AppsV1().ReplicaSets(e.ns).Delete(e.ctx, rs.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatalf("delete ReplicaSet: %v", err)
			}
			e.waitGone(cm.Name)
			t.Logf("rollout: garbage-collected %s after the ReplicaSet was deleted", time.Since(deleted).Round(time.Millisecond))

			// A Deployment: the real deployment controller makes the ReplicaSet.
			cm2 := e.createRevision("web-config-1")
			created = time.Now()
			dep := e.createDeployment("web", cm2.Name)
			var depRS *appsv1.ReplicaSet
			controlplane.Eventually(t, 30*time.Second, "the Deployment's ReplicaSet", func() error {
				list, err := e.kube.AppsV1().ReplicaSets(e.ns).List(e.ctx, metav1.ListOptions{LabelSelector: "app=web"})
				if err != nil || len(list.Items) != 1 {
					return fmt.Errorf("%d ReplicaSets (err %v)", len(list.Items), err)
				}
				depRS = &list.Items[0]
				return nil
			})
			e.waitOwned(cm2.Name, depRS.Name, depRS.UID)
			t.Logf("deployment: attached %s after the Deployment was created", time.Since(created).Round(time.Millisecond))
			deleted = time.Now()
			if err := e.kube.AppsV1().Deployments(e.ns).Delete(e.ctx, dep.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatalf("delete Deployment: %v", err)
			}
			e.waitGone(cm2.Name)
			t.Logf("deployment: garbage-collected %s after the Deployment was deleted", time.Since(deleted).Round(time.Millisecond))
		})
	}
}

// waitOwned waits until the ConfigMap has a non-controller ownerReference to the ReplicaSet.
func (e *env) waitOwned(cm, rsName string, uid types.UID) {
	e.t.Helper()
	controlplane.Eventually(e.t, 30*time.Second, "ConfigMap "+cm+" owned by ReplicaSet "+rsName, func() error {
		got, err := e.kube.CoreV1().ConfigMaps(e.ns).Get(e.ctx, cm, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, o := range got.OwnerReferences {
			if o.UID == uid && o.Kind == "ReplicaSet" && o.APIVersion == "apps/v1" && o.Name == rsName {
				if o.Controller != nil && *o.Controller {
					return fmt.Errorf("ownerReference is a controller reference: %+v", o)
				}
				return nil
			}
		}
		return fmt.Errorf("ownerReferences %v", got.OwnerReferences)
	})
}

// waitGone waits until the garbage collector has deleted the ConfigMap.
func (e *env) waitGone(cm string) {
	e.t.Helper()
	controlplane.Eventually(e.t, 60*time.Second, "garbage collector deletes ConfigMap "+cm, func() error {
		_, err := e.kube.CoreV1().ConfigMaps(e.ns).Get(e.ctx, cm, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("ConfigMap still there (err %v)", err)
	})
}

// startServer runs configmap-attacher's service (internal/server: informer cache, core,
// gRPC custom trigger and HTTP receiver) in-process on free loopback ports, waits until
// its caches have synced, and stops it gracefully at cleanup. With e.httpAuth the HTTP
// receiver requires argoevents.TestHTTPToken, as the chart's default requires a token.
func startServer(t *testing.T, e *env) *server.Server {
	t.Helper()
	o := server.Options{GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", ShutdownTimeout: 5 * time.Second}
	if e.httpAuth {
		o.HTTPToken = []byte(argoevents.TestHTTPToken)
	}
	srv, err := server.New(e.cp.RESTConfig(), o)
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server.Run: %v", err)
		}
	})
	if err := srv.Cache().WaitForSync(e.ctx); err != nil {
		t.Fatalf("server caches: %v", err)
	}
	return srv
}

// pointGRPC aims the Sensor's custom trigger at the in-process gRPC server.
func pointGRPC(t *testing.T, e *env) error {
	e.grpcAddr = startServer(t, e).GRPCAddr()
	return nil
}

// pointHTTP aims the Sensor's HTTP trigger at the in-process HTTP receiver, which
// requires the bearer token the Sensor's secureHeaders send.
func pointHTTP(t *testing.T, e *env) error {
	e.httpAuth = true
	e.httpURL = "http://" + startServer(t, e).HTTPAddr()
	return nil
}
