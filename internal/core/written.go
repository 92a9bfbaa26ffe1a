package core

import (
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// recentWritesCap bounds how many writes recentWrites remembers.
const recentWritesCap = 4096

// recentWrites remembers, for the last writes of this Attacher, the resourceVersion each
// was decided on and the metadata it left. A cached object still at such a version is
// stale (this Attacher changed it since): its successor is used instead. So two ways in
// handling the same object moments apart (the revision side and an event) make one
// PATCH, not a second one bound to be refused with a conflict. Stale entries are
// harmless: a version is matched exactly. Memory is bounded by recentWritesCap.
type recentWrites struct {
	mu    sync.Mutex
	by    map[string]written
	order []string // FIFO of keys, for eviction
}

type written struct {
	from  string
	after *metav1.PartialObjectMetadata
}

// fresher returns the metadata this Attacher's last write of key left, when m is the
// state that write was decided on; else m.
func (r *recentWrites) fresher(key string, m *metav1.PartialObjectMetadata) *metav1.PartialObjectMetadata {
	if m == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if w, ok := r.by[key]; ok && w.after.UID == m.UID && w.from == m.ResourceVersion {
		return w.after
	}
	return m
}

// wrote records a write of key decided on resourceVersion from that left after.
// A write whose answer keeps the version it was decided on stored nothing (a server
// dry run, dryRun=All) or changed nothing: it is not remembered.
func (r *recentWrites) wrote(key, from string, after *metav1.PartialObjectMetadata) {
	if after == nil || after.ResourceVersion == from {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.by == nil {
		r.by = map[string]written{}
	}
	if _, ok := r.by[key]; !ok {
		if len(r.order) >= recentWritesCap {
			delete(r.by, r.order[0])
			r.order = r.order[1:]
		}
		r.order = append(r.order, key)
	}
	r.by[key] = written{from: from, after: after}
}
