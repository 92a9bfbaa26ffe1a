package core

import "sync"

// keyLocks serialises work on one object key while letting different keys proceed in
// parallel. Entries are reference counted and removed when unused, so memory is bounded
// by the number of objects in flight.
type keyLocks struct {
	mu sync.Mutex
	m  map[string]*keyLock
}

type keyLock struct {
	sync.Mutex
	refs int
}

func (l *keyLocks) lock(key string) func() {
	l.mu.Lock()
	if l.m == nil {
		l.m = map[string]*keyLock{}
	}
	k := l.m[key]
	if k == nil {
		k = &keyLock{}
		l.m[key] = k
	}
	k.refs++
	l.mu.Unlock()
	k.Lock()
	return func() {
		k.Unlock()
		l.mu.Lock()
		k.refs--
		if k.refs == 0 {
			delete(l.m, key)
		}
		l.mu.Unlock()
	}
}
