package externalsecrets

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// errStop ends poll at once with its error.
type errStop struct{ error }

// poll calls check every 200 ms until it returns nil, returns errStop, or ctx ends.
func poll(ctx context.Context, check func() error) error {
	for {
		err := check()
		if err == nil {
			return nil
		}
		var stop errStop
		if errors.As(err, &stop) {
			return stop.error
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
