package shard

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/component-helpers/apimachinery/lease"
	"k8s.io/utils/clock"
)

// One identity, two processes (docs/design.md, "Fleet"): the Leases fence by holder
// identity, so two processes given one identity (a fixed --fleet-identity, a StatefulSet
// pod briefly twice) would renew one member Lease and both lead every shard Lease. Each
// process therefore carries an instance token, written on the member Lease it renews; a
// process renews it only while no other instance does, and of two that renew it at once
// the younger gives way.

// errIdentityInUse refuses the shard Lease writes of an instance that gave way: the
// Leases under its identity are the other instance's.
var errIdentityInUse = errors.New("shard: this replica's identity is in use by another instance")

// instanceToken returns the token of a process started at t: the start time in Unix
// nanoseconds, zero-padded to a fixed width so that lexical order is age order (the
// older first), then a random part for two started in one nanosecond.
func instanceToken(t time.Time) string {
	return fmt.Sprintf("%019d-%016x", t.UnixNano(), rand.Uint64())
}

// claim reports whether this instance renews the member Lease of its identity, and
// starts or stops doing so. It starts unless that Lease is fresh (renewed within its
// duration by another instance, or by this one before it gave way); it gives way when
// it sees the Lease fresh with the token of an older instance (or none: a version before
// tokens), which happens only when both renew it. A giving-way or waiting instance holds
// nothing and contends for nothing until the Lease expires or is deleted.
func (m *Manager) claim(now time.Time) bool {
	token, fresh := m.memberToken(now)
	switch {
	case m.beat == nil && fresh:
		if m.waiting.CompareAndSwap(false, true) {
			m.o.Logger.Error("another instance renews this replica's member Lease (its identity is in use): "+
				"this one holds no shard until that Lease expires or is deleted", "lease", m.o.memberLease(),
				"instance", m.instance, "other", token)
		}
		return false
	case m.beat == nil:
		m.startBeat(now)
		return true
	case fresh && token < m.instance:
		m.waiting.Store(true) // first: its electors write no shard Lease from here on (instanceLock)
		m.stopBeat()
		m.stopAll()
		m.o.Logger.Error("an older instance renews this replica's member Lease too (its identity is in use): "+
			"this one stopped its clusters and holds no shard until that Lease expires or is deleted",
			"lease", m.o.memberLease(), "instance", m.instance, "other", token)
		return false
	}
	return true
}

// memberToken returns the instance token on this identity's member Lease and whether
// the Lease is fresh.
func (m *Manager) memberToken(now time.Time) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.leases[m.o.memberLease()]
	return l.instance, ok && l.fresh(now)
}

// heartbeat is the member Lease's renewals (client-go's node-lease heartbeat).
type heartbeat struct {
	stop context.CancelFunc
	done chan struct{}
}

// startBeat starts renewing the member Lease. A claim starts the instance's membership
// anew: it takes shards as preferred replica only two retry periods later, by when an
// instance that claimed the identity at the same moment has been seen.
func (m *Manager) startBeat(now time.Time) {
	if m.waiting.CompareAndSwap(true, false) {
		m.o.Logger.Info("the member Lease of this replica's identity is free: this instance renews it", "instance", m.instance)
	}
	m.mu.Lock()
	m.start = now
	m.mu.Unlock()
	hb := lease.NewController(clock.RealClock{}, m.o.Client, m.o.Identity, int32(m.o.LeaseDuration/time.Second), nil,
		m.o.RetryPeriod, m.o.memberLease(), m.o.Namespace, m.annotate)
	ctx, stop := context.WithCancel(context.WithoutCancel(m.ctx()))
	m.beat = &heartbeat{stop: stop, done: make(chan struct{})}
	go func(done chan struct{}) { defer close(done); hb.Run(ctx) }(m.beat.done)
}

// stopBeat stops the renewals and waits for them; false if there were none.
func (m *Manager) stopBeat() bool {
	if m.beat == nil {
		return false
	}
	m.beat.stop()
	<-m.beat.done
	m.beat = nil
	return true
}

// leave deletes this replica's member Lease, so that the others stop counting it at
// once: only while it carries this instance's token (another may renew it since).
func (m *Manager) leave() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	leases := m.o.Client.CoordinationV1().Leases(m.o.Namespace)
	l, err := leases.Get(ctx, m.o.memberLease(), metav1.GetOptions{})
	if err == nil && l.Annotations[AnnotationInstance] != m.instance {
		return
	}
	if err == nil {
		err = leases.Delete(ctx, l.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &l.ResourceVersion}})
	}
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		m.o.Logger.Warn("member Lease not deleted; it expires", "error", err)
	}
}

// instanceLock is a shard Lease's lock that writes nothing while this instance waits
// for its identity: a shard Lease it led is led under the identity it shares with the
// other instance, so giving way must not release it (nor renew it).
type instanceLock struct {
	resourcelock.Interface
	m *Manager
}

func (l instanceLock) Create(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	if l.m.waiting.Load() {
		return errIdentityInUse
	}
	return l.Interface.Create(ctx, r)
}

func (l instanceLock) Update(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	if l.m.waiting.Load() {
		return errIdentityInUse
	}
	return l.Interface.Update(ctx, r)
}
