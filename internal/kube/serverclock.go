package kube

import (
	"net/http"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
)

// ServerClock estimates the apiserver's clock from the Date header of its answers, so
// that ages computed from the creation times it stamps (the orphan sweep's grace period)
// do not depend on this process's clock (docs/design.md, "The sweep from the caches").
type ServerClock struct {
	local  func() time.Time
	offset atomic.Int64 // server minus local, in nanoseconds
	seen   atomic.Bool
}

// NewServerClock returns a ServerClock over the local clock local (nil: time.Now).
func NewServerClock(local func() time.Time) *ServerClock {
	if local == nil {
		local = time.Now
	}
	return &ServerClock{local: local}
}

// Wrap returns a copy of cfg whose answers update c.
func (c *ServerClock) Wrap(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper { return dateReader{next: rt, clock: c} })
	return out
}

// Now returns the earlier of the local time and the apiserver's as last estimated (the
// local time until an answer with a Date header came). Date has a resolution of a
// second and is stamped before the answer travels, so the estimate is at most that late:
// ages read against it are never longer than the apiserver's own. A nil c is time.Now.
func (c *ServerClock) Now() time.Time {
	if c == nil {
		return time.Now()
	}
	local := c.local()
	if !c.seen.Load() {
		return local
	}
	if server := local.Add(time.Duration(c.offset.Load())); server.Before(local) {
		return server
	}
	return local
}

type dateReader struct {
	next  http.RoundTripper
	clock *ServerClock
}

func (d dateReader) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := d.next.RoundTrip(r)
	if err == nil {
		if t, perr := http.ParseTime(resp.Header.Get("Date")); perr == nil {
			d.clock.offset.Store(int64(t.Sub(d.clock.local())))
			d.clock.seen.Store(true)
		}
	}
	return resp, err
}
