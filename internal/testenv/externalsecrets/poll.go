package externalsecrets

import (
	"context"
	"time"

	"github.com/configmap-attacher/configmap-attacher/internal/testenv/harnessproc"
)

// poll calls check every 200 ms until it returns nil, a harnessproc.StopPolling, or ctx
// ends.
func poll(ctx context.Context, check func() error) error {
	return harnessproc.Poll(ctx, 200*time.Millisecond, check)
}
