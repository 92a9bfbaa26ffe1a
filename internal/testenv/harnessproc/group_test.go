package harnessproc_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/configmap-attacher/configmap-attacher/internal/testenv/harnessproc"
)

func TestPollEndsOnSuccessOnStopPollingAndOnTheContext(t *testing.T) {
	boom := errors.New("boom")
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name  string
		ctx   context.Context
		check func(calls int) error
		want  error
		calls int
	}{
		{"success after retries", context.Background(), func(n int) error {
			if n < 3 {
				return errors.New("not yet")
			}
			return nil
		}, nil, 3},
		{"StopPolling returns its error at once", context.Background(), func(int) error { return harnessproc.StopPolling(boom) }, boom, 1},
		{"an ended context returns its error", cancelled, func(int) error { return errors.New("not yet") }, context.Canceled, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			err := harnessproc.Poll(tc.ctx, time.Millisecond, func() error { calls++; return tc.check(calls) })
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("Poll = %v, want %v", err, tc.want)
			}
			if calls != tc.calls {
				t.Fatalf("check called %d times, want %d", calls, tc.calls)
			}
		})
	}
}

func TestCheckBinariesNamesTheFirstMissingOne(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "there"), nil, 0o700); err != nil {
		t.Fatal(err)
	}
	missing := errors.New("missing")
	if err := harnessproc.CheckBinaries(dir, []string{"there"}, missing); err != nil {
		t.Fatalf("all there: %v", err)
	}
	err := harnessproc.CheckBinaries(dir, []string{"there", "absent"}, missing)
	if !errors.Is(err, missing) || !strings.Contains(err.Error(), "absent") {
		t.Fatalf("CheckBinaries = %v, want %v naming absent", err, missing)
	}
}

func TestStartReadyFailsWithTheLogWhenTheProcessExitsFirst(t *testing.T) {
	var g harnessproc.Group
	defer g.Stop(time.Second)
	_, err := g.StartReady(context.Background(), t.TempDir(), "quits", "/bin/sh", []string{"-c", "echo last words; exit 3"}, nil,
		func() error { return errors.New("never ready") })
	if err == nil || !strings.Contains(err.Error(), "last words") {
		t.Fatalf("StartReady = %v, want the exit with the log's tail", err)
	}
	if got := g.LogTail("quits", 1); got != "last words" {
		t.Fatalf("LogTail = %q", got)
	}
}
