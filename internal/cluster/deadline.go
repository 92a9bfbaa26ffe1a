package cluster

import (
	"context"
	"io"
	"net/http"

	"k8s.io/client-go/rest"
	"time"
)

// DefaultRequestTimeout bounds every request to a served cluster but watches (see
// withRequestDeadline).
const DefaultRequestTimeout = time.Minute

// withRequestDeadline returns a copy of cfg whose every request but a watch ends within
// d, body included, whatever context the caller gave: a cluster whose apiserver (or
// network) hangs cannot hold a caller forever. Watches are long by design; client-go
// ends a dead one through HTTP/2 health pings and the server-side timeout.
func withRequestDeadline(cfg *rest.Config, d time.Duration) *rest.Config {
	if d <= 0 {
		d = DefaultRequestTimeout
	}
	out := rest.CopyConfig(cfg)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper { return deadlineRoundTripper{next: rt, d: d} })
	return out
}

type deadlineRoundTripper struct {
	next http.RoundTripper
	d    time.Duration
}

// RoundTrip implements http.RoundTripper.
func (t deadlineRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if w := req.URL.Query().Get("watch"); w == "true" || w == "1" {
		return t.next.RoundTrip(req)
	}
	ctx, cancel := context.WithTimeout(req.Context(), t.d)
	resp, err := t.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}
