package argoevents_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/argoevents"
	"github.com/configmap-attacher/configmap-attacher/internal/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/server"
)

// TestEndToEnd is the proof with the real Argo Events: local control plane (with its real
// garbage collector), NATS JetStream, the real eventsource-service running the shipped
// EventSource, the real sensor-service running a shipped Sensor, and configmap-attacher
// in-process. A Rollout-owned ReplicaSet that uses an opted-in ConfigMap gets it
// attached within seconds; deleting the ReplicaSet lets the garbage collector delete it.
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

			cm := e.createRevision("app-config-1")
			created := time.Now()
			rs := e.createRolloutReplicaSet("app", cm.Name)
			controlplane.Eventually(t, 30*time.Second, "ConfigMap owned by the ReplicaSet", func() error {
				got, err := e.kube.CoreV1().ConfigMaps(e.ns).Get(e.ctx, cm.Name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				for _, o := range got.OwnerReferences {
					if o.UID == rs.UID && o.Kind == "ReplicaSet" && o.APIVersion == "apps/v1" && o.Name == rs.Name {
						if o.Controller != nil && *o.Controller {
							return fmt.Errorf("ownerReference is a controller reference: %+v", o)
						}
						return nil
					}
				}
				return fmt.Errorf("ownerReferences %v", got.OwnerReferences)
			})
			t.Logf("attached %s after the ReplicaSet was created", time.Since(created).Round(time.Millisecond))

			deleted := time.Now()
			if err := e.kube.AppsV1().ReplicaSets(e.ns).Delete(e.ctx, rs.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatalf("delete ReplicaSet: %v", err)
			}
			controlplane.Eventually(t, 60*time.Second, "garbage collector deletes the ConfigMap", func() error {
				_, err := e.kube.CoreV1().ConfigMaps(e.ns).Get(e.ctx, cm.Name, metav1.GetOptions{})
				if apierrors.IsNotFound(err) {
					return nil
				}
				return fmt.Errorf("ConfigMap still there (err %v)", err)
			})
			t.Logf("garbage-collected %s after the ReplicaSet was deleted", time.Since(deleted).Round(time.Millisecond))
		})
	}
}

// startServer runs configmap-attacher's service (internal/server: informer cache, core,
// gRPC custom trigger and HTTP receiver) in-process on free loopback ports, waits until
// its caches have synced, and stops it gracefully at cleanup.
func startServer(t *testing.T, e *env) *server.Server {
	t.Helper()
	srv, err := server.New(e.cp.RESTConfig(), server.Options{GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", ShutdownTimeout: 5 * time.Second})
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

// pointHTTP aims the Sensor's HTTP trigger at the in-process HTTP receiver.
func pointHTTP(t *testing.T, e *env) error {
	e.httpURL = "http://" + startServer(t, e).HTTPAddr()
	return nil
}
