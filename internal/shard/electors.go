package shard

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// contend starts client-go leader election on shard i's Lease. While it leads, the
// shard is held: OnChange starts its clusters. When it stops leading (its renewals
// failed for RenewDeadline, or it was cancelled) the shard is no longer held and
// OnChange stops its clusters before the elector returns.
func (m *Manager) contend(i int) {
	name := m.o.shardLease(i)
	lock := instanceLock{Interface: &resourcelock.LeaseLock{LeaseMeta: metav1.ObjectMeta{Namespace: m.o.Namespace, Name: name},
		Client: m.o.Client.CoordinationV1(), LockConfig: resourcelock.ResourceLockConfig{Identity: m.o.Identity},
		Labels: map[string]string{LabelFleet: m.o.Fleet, LabelRole: roleShard}}, m: m}
	log := m.o.Logger.With("shard", i, "lease", name)
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{Lock: lock, Name: name,
		LeaseDuration: m.o.LeaseDuration, RenewDeadline: m.o.RenewDeadline, RetryPeriod: m.o.RetryPeriod, ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) {
				m.mu.Lock()
				m.taken[i] = time.Now()
				m.mu.Unlock()
				m.held.set(i, true)
				log.Info("shard held: its clusters start here")
				m.o.OnChange(m.ctx())
			},
			OnStoppedLeading: func() {
				if !m.held.has(i) {
					return // never led, or released on purpose (stopped already)
				}
				m.held.set(i, false)
				log.Warn("shard lost: its clusters stop here")
				m.fence()
			},
		}})
	if err != nil {
		log.Error("shard elector not built", "error", err)
		return
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(m.ctx()))
	e := &elector{cancel: cancel, done: make(chan struct{})}
	m.mu.Lock()
	m.electors[i] = e
	m.mu.Unlock()
	go func() {
		defer close(e.done)
		le.Run(ctx)
	}()
}

// fence stops the clusters of the shards no longer held, within the renew margin.
func (m *Manager) fence() {
	ctx, cancel := context.WithTimeout(context.Background(), m.o.LeaseDuration-m.o.RenewDeadline)
	defer cancel()
	m.o.OnChange(ctx)
}

func (m *Manager) ctx() context.Context {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.runCtx == nil {
		return context.Background()
	}
	return m.runCtx
}

// release gives shard i up to its preferred replica: its clusters stop here first,
// then the Lease is released (ReleaseOnCancel), so that the preferred replica, which
// contends for it, takes it at its next try; this replica holds off meanwhile (releases).
func (m *Manager) release(i int, to string) {
	m.held.set(i, false)
	m.released.note(i, to, time.Now())
	m.o.Logger.Info("shard released to its preferred replica", "shard", i, "to", to)
	m.fence()
	m.stopElector(i)
}

// stopElector cancels shard i's elector and waits for it (its release of the Lease).
func (m *Manager) stopElector(i int) {
	m.mu.Lock()
	e := m.electors[i]
	delete(m.electors, i)
	m.mu.Unlock()
	if e == nil {
		return
	}
	e.cancel()
	<-e.done
}

// stopAll stops every cluster, then every elector (releasing the held Leases).
func (m *Manager) stopAll() {
	for _, i := range m.held.list() {
		m.held.set(i, false)
	}
	m.fence()
	m.mu.Lock()
	ids := make([]int, 0, len(m.electors))
	for i := range m.electors {
		ids = append(ids, i)
	}
	m.mu.Unlock()
	for _, i := range ids {
		m.stopElector(i)
	}
}
