package core

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// DefaultBackoff's 30 tries are 30 tries: wait.ExponentialBackoff stops as soon as the
// delay reaches the cap (after 11 tries for DefaultBackoff), which left concurrent
// writers of a busy ConfigMap with "still conflicting" after about 1.5 s.
func TestRetryKeepsTryingAtTheCap(t *testing.T) {
	b := wait.Backoff{Steps: 30, Duration: time.Microsecond, Factor: 1.5, Cap: 10 * time.Microsecond}
	cases := []struct {
		name      string
		doneAfter int // tries until done; 0: never
		fail      error
		want      error
		wantTries int
	}{
		{name: "every step is tried", want: errRetriesExhausted, wantTries: 30},
		{name: "done stops", doneAfter: 3, wantTries: 3},
		{name: "an error stops", fail: errors.New("boom"), want: errors.New("boom"), wantTries: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tries := 0
			err := retry(context.Background(), b, func(context.Context) (bool, error) {
				tries++
				return tc.doneAfter > 0 && tries >= tc.doneAfter, tc.fail
			})
			if (err == nil) != (tc.want == nil) || (err != nil && err.Error() != tc.want.Error()) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			if tries != tc.wantTries {
				t.Fatalf("%d tries, want %d", tries, tc.wantTries)
			}
		})
	}
	t.Run("a cancelled context stops", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := retry(ctx, wait.Backoff{Steps: 5, Duration: time.Hour}, func(context.Context) (bool, error) { return false, nil })
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v", err)
		}
	})
}
