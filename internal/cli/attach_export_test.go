package cli

import "time"

// SetProgressEvery sets how often a waiting attach reports progress, for tests; it
// returns a function restoring the previous value.
func SetProgressEvery(d time.Duration) func() {
	old := progressEvery
	progressEvery = d
	return func() { progressEvery = old }
}

// SetListedSettle sets how long after a listed object's creation attach still waits
// for a spec that uses it, for tests; it returns a function restoring the default.
func SetListedSettle(d time.Duration) func() {
	old := listedSettle
	listedSettle = d
	return func() { listedSettle = old }
}
