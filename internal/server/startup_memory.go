package server

import (
	"context"
	"log/slog"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/configmap-attacher/configmap-attacher/internal/watch"
)

// releaseAfterReplay returns the start-up's garbage to the OS once every watcher of a
// cluster has handled its start-up replay: the initial lists' pages and the objects the
// replay decoded are free by then, but at the default GC target the heap had grown to
// about twice what the caches hold, and the runtime would return that memory only over
// minutes. One forced collection (debug.FreeOSMemory) right after start-up gives the
// resident memory the caches' size at once (docs/design.md, "Memory after start-up").
func releaseAfterReplay(ctx context.Context, log *slog.Logger, watchers []*watch.Watcher) {
	for _, w := range watchers {
		select {
		case <-w.Replayed():
		case <-ctx.Done():
			return
		}
	}
	start := time.Now()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	log.Info("start-up done, its garbage returned to the OS", "heapBytes", ms.HeapAlloc,
		"releasedBytes", ms.HeapReleased, "took", time.Since(start).Round(time.Millisecond))
}
