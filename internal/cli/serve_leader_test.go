package cli_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/cli"
	"github.com/configmap-attacher/configmap-attacher/internal/gc"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// Two `serve --leader-elect --gc-interval` replicas: one holds the Lease and sweeps; when it
// stops, it releases the Lease and the other takes over.
func TestServeLeaderElection(t *testing.T) {
	cp := controlplane.Require(t, sharedCP)
	ctx := context.Background()
	kc := cp.Client()
	ns := newNamespace(t, cp)
	start := func() (stop func() int) {
		runCtx, cancel := context.WithCancel(ctx)
		var out testfix.SyncBuffer
		done := make(chan int, 1)
		go func() {
			done <- cli.Main(runCtx, []string{"serve", "--kubeconfig", cp.Kubeconfig(), "--grpc-addr", "-", "--http-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0",
				"--gc-interval", "1s", "--leader-elect", "--leader-elect-namespace", ns, "--log-level", "warn"},
				cli.Streams{In: strings.NewReader(""), Out: &out, Err: &out})
		}()
		return func() int {
			cancel()
			select {
			case code := <-done:
				return code
			case <-time.After(60 * time.Second):
				t.Fatalf("serve did not stop: %s", out.String())
				return -1
			}
		}
	}
	holder := func() (string, error) {
		l, err := kc.CoordinationV1().Leases(ns).Get(ctx, gc.DefaultLeaseName, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			return "", errors.New("no holder")
		}
		return *l.Spec.HolderIdentity, nil
	}

	stopA := start()
	var first string
	controlplane.Eventually(t, 60*time.Second, "the first replica to lead", func() (err error) {
		first, err = holder()
		return err
	})
	stopB := start()
	defer stopB()
	time.Sleep(5 * time.Second) // several retry periods: B must not take the Lease while A renews it
	h, err := holder()
	assert.NoError(t, err)
	assert.Equal(t, first, h, "one leader at a time")

	assert.Equal(t, 0, stopA())
	controlplane.Eventually(t, 60*time.Second, "the second replica to take over", func() error {
		h, err := holder()
		if err != nil {
			return err
		}
		if h == first {
			return errors.New("still held by the stopped replica")
		}
		return nil
	})
}
