package kube

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
)

// The broadcast recorder builds its broadcaster with the first Event: one recorded
// before the stop is written, a recorder stopped without any wrote none and one recorded
// after the stop is dropped.
func TestBroadcastRecorderStartsWithItsFirstEvent(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "rev", Namespace: "ns", UID: "u1"}}
	tests := []struct {
		name       string
		before     int // Events recorded before the stop
		after      int // and after it
		wantEvents bool
	}{
		{name: "an Event before the stop is written", before: 1, wantEvents: true},
		{name: "no Event: nothing built, nothing written", before: 0},
		{name: "an Event after the stop is dropped", after: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset()
			rec, stop := NewBroadcastRecorder(client)
			lr := rec.(*lazyRecorder)
			for range tc.before {
				rec.Eventf(cm, corev1.EventTypeNormal, "Attached", "to %s", "rs")
			}
			if built := lr.rec != nil; built != (tc.before > 0) {
				t.Fatalf("broadcaster built: %v, want %v", built, tc.before > 0)
			}
			if tc.wantEvents {
				// The broadcaster writes asynchronously: wait for the Event before the stop.
				err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true,
					func(ctx context.Context) (bool, error) {
						l, err := client.CoreV1().Events("ns").List(ctx, metav1.ListOptions{})
						return err == nil && len(l.Items) > 0, nil
					})
				if err != nil {
					t.Fatalf("the Event was not written: %v", err)
				}
			}
			stop()
			for range tc.after {
				rec.Eventf(cm, corev1.EventTypeNormal, "Attached", "to %s", "rs")
			}
			if tc.after > 0 && lr.rec != nil {
				t.Fatal("an Event after the stop built a broadcaster")
			}
			l, err := client.CoreV1().Events("ns").List(context.Background(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := len(l.Items) > 0; got != tc.wantEvents {
				t.Fatalf("Events written: %d, want some: %v", len(l.Items), tc.wantEvents)
			}
		})
	}
}
