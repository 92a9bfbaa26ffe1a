package cli

import "time"

// SetProgressEvery sets how often a waiting attach reports progress, for tests; it
// returns a function restoring the previous value.
func SetProgressEvery(d time.Duration) func() {
	old := progressEvery
	progressEvery = d
	return func() { progressEvery = old }
}
