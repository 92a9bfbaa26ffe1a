package harnessproc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Group is the processes of one harness component (Argo CD's, Flux's, External Secrets'),
// stopped together, the last started first.
type Group struct{ procs []*Process }

// StartReady starts bin as Start does, adds it to g and waits until ready returns nil;
// it fails at once, with the log's tail, if the process exits first.
func (g *Group) StartReady(ctx context.Context, dir, name, bin string, args, env []string, ready func() error) (*Process, error) {
	p, err := Start(dir, name, bin, args, env)
	if err != nil {
		return nil, err
	}
	g.procs = append(g.procs, p)
	return p, Poll(ctx, 100*time.Millisecond, func() error {
		if err := p.Exited(); err != nil {
			return StopPolling(err)
		}
		return ready()
	})
}

// Stop stops every process, the last started first (SIGTERM, then SIGKILL after grace).
// Safe to call twice.
func (g *Group) Stop(grace time.Duration) {
	for i := len(g.procs) - 1; i >= 0; i-- {
		g.procs[i].Stop(grace)
	}
	g.procs = nil
}

// LogTail is the last n lines of the log of the process started as name ("" if none).
func (g *Group) LogTail(name string, n int) string {
	for _, p := range g.procs {
		if p.Name() == name {
			return p.Tail(n)
		}
	}
	return ""
}

// CheckBinaries returns missing, naming the first absent one, unless every one of names
// is in binDir.
func CheckBinaries(binDir string, names []string, missing error) error {
	for _, b := range names {
		if _, err := os.Stat(filepath.Join(binDir, b)); err != nil {
			return fmt.Errorf("%w (%s not found in %s)", missing, b, binDir)
		}
	}
	return nil
}

// Subdir is the folder name under dir, created (0700) if need be.
func Subdir(dir, name string) string {
	d := filepath.Join(dir, name)
	_ = os.MkdirAll(d, 0o700)
	return d
}

// stopPolling ends a Poll at once with its error.
type stopPolling struct{ error }

// StopPolling wraps err so that Poll returns it at once instead of checking again.
func StopPolling(err error) error { return stopPolling{err} }

// Poll calls check every interval until it returns nil, an error of StopPolling (Poll
// returns what it wraps), or ctx ends (the context's error, with check's last one).
func Poll(ctx context.Context, interval time.Duration, check func() error) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		err := check()
		if err == nil {
			return nil
		}
		var stop stopPolling
		if errors.As(err, &stop) {
			return stop.error
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-t.C:
		}
	}
}
