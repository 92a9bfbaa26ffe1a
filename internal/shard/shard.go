// Package shard shares a fleet of clusters among the replicas of the service on
// Kubernetes Leases (coordination.k8s.io/v1), through client-go: a fixed number of
// shard Leases, each held through client-go leader election by at most one replica,
// and one member Lease per replica (client-go's node-lease heartbeat,
// k8s.io/component-helpers) that says it is alive, where it is reached and which shards
// it holds. A cluster belongs to the shard its Argo CD Secret pins (`shard` field), else
// to a stable hash of its name. Replicas agree on a preferred holder per shard with no
// coordination: Assign, a pure function of the live members and the number of shards,
// is rendezvous hashing under balanced loads (each member holds floor or ceil of
// shards/N). Once the member set has been stable for two retry periods, the preferred
// replica contends for the shard, the standby (the one preferred if the preferred left)
// for a shard some replica holds, and a replica holding a shard whose preferred replica
// is alive releases it after stopping its clusters; anyone takes a shard whose Lease has
// been expired for a grace period (docs/design.md, "Fleet"). Lease traffic grows with the
// replicas and the shards, never with the clusters.
package shard

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
)

// Defaults of Options.
const (
	DefaultShards        = 16
	DefaultFleet         = "configmap-attacher"
	DefaultLeaseDuration = 10 * time.Second
	DefaultRenewDeadline = 6 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

// Labels and annotations of the fleet's Leases.
const (
	LabelFleet        = "configmap-attacher.io/fleet"
	LabelRole         = "configmap-attacher.io/fleet-role"
	AnnotationAddress = "configmap-attacher.io/address"
	AnnotationShards  = "configmap-attacher.io/shards"
	// AnnotationInstance is the token of the process renewing a member Lease: its start
	// time and a random part, so that two processes given one identity tell each other
	// apart, the older first in lexical order (docs/design.md, "Fleet").
	AnnotationInstance = "configmap-attacher.io/instance"
	// AnnotationShardCount and AnnotationStarted are a member's --fleet-shards and start
	// time (RFC 3339): the fleet's shard count is its oldest live member's.
	AnnotationShardCount = "configmap-attacher.io/shard-count"
	AnnotationStarted    = "configmap-attacher.io/started"
	roleShard            = "shard"
	roleMember           = "member"
)

// Options configure a Manager.
type Options struct {
	// Client reads and writes the Leases: a client of its own (its own rate limiter), so
	// that an attach never waits behind a renewal. Required.
	Client kubernetes.Interface
	// Namespace holds the Leases. Required.
	Namespace string
	// Fleet names the fleet: its Leases are named Fleet-shard-N and Fleet-member-ID.
	Fleet string
	// Shards is the number of shards (every replica of a fleet must agree on it).
	Shards int
	// Identity names this replica (default: the host name, the pod's name).
	Identity string
	// Address is where other replicas forward this replica the events of its clusters
	// (host:port). Required.
	Address string
	// LeaseDuration, RenewDeadline and RetryPeriod are client-go leader election's, for
	// the shard Leases; the member Lease lasts LeaseDuration and is renewed every
	// RetryPeriod. RenewDeadline < LeaseDuration: a replica that cannot renew stops
	// its clusters before another may take them.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Grace is how long a shard's Lease must have been expired before a replica other
	// than its preferred ones takes it; default LeaseDuration.
	Grace time.Duration
	// OnChange is called whenever the shards this replica holds change, and before a
	// shard is released or once it is lost; it must stop the clusters of shards no
	// longer held before it returns (within its ctx).
	OnChange func(ctx context.Context)
	// Clusters, when set, returns every registered cluster with its pin (-1 for none),
	// for the fleet metrics (clusters with no owner, with two).
	Clusters func() map[string]int
	// Logger receives logs; nil means slog.Default().
	Logger *slog.Logger
}

func (o *Options) defaults() error {
	if o.Client == nil || o.Namespace == "" || o.Address == "" {
		return errors.New("shard: Options need a Client, a Namespace and an Address")
	}
	if o.Fleet == "" {
		o.Fleet = DefaultFleet
	}
	if o.Shards <= 0 {
		o.Shards = DefaultShards
	}
	if o.Identity == "" {
		host, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("shard: identity: %w", err)
		}
		o.Identity = host
	}
	if errs := validation.IsDNS1123Subdomain(o.memberLease()); len(errs) > 0 {
		return fmt.Errorf("shard: identity %q does not make a valid Lease name: %v", o.Identity, errs)
	}
	if o.LeaseDuration <= 0 {
		o.LeaseDuration = DefaultLeaseDuration
	}
	if o.RenewDeadline <= 0 {
		o.RenewDeadline = DefaultRenewDeadline
	}
	if o.RetryPeriod <= 0 {
		o.RetryPeriod = DefaultRetryPeriod
	}
	if o.RenewDeadline >= o.LeaseDuration {
		return fmt.Errorf("shard: the renew deadline (%s) must be shorter than the lease duration (%s)", o.RenewDeadline, o.LeaseDuration)
	}
	if o.Grace <= 0 {
		o.Grace = o.LeaseDuration
	}
	if o.OnChange == nil {
		o.OnChange = func(context.Context) {}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return nil
}

func (o *Options) shardLease(i int) string { return fmt.Sprintf("%s-shard-%d", o.Fleet, i) }
func (o *Options) memberLease() string     { return o.Fleet + "-member-" + o.Identity }

// Of returns the shard of a cluster: pin when it is a shard of the fleet (Argo CD's
// `shard` field), else a stable hash of the name (FNV-1a). An out-of-range pin is
// ignored, so that no pin leaves a cluster without an owner.
func Of(name string, pin, shards int) int {
	if pin >= 0 && pin < shards {
		return pin
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	return int(h.Sum32() % uint32(shards))
}

// held is the set of shards this replica leads, safe for concurrent use.
type held struct {
	mu sync.RWMutex
	by map[int]bool
}

func (h *held) set(i int, v bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if v {
		h.by[i] = true
	} else {
		delete(h.by, i)
	}
}

func (h *held) has(i int) bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.by[i]
}

func (h *held) list() []int {
	h.mu.RLock()
	defer h.mu.RUnlock()
	out := make([]int, 0, len(h.by))
	for i := range h.by {
		out = append(out, i)
	}
	return out
}

// releases remembers, shard by shard, to which replica this one last released a shard
// and when, safe for concurrent use. A shard's standby replica contends for it while a
// replica holds its Lease; right after it released the shard to the preferred replica
// its view of the Lease may still show itself the holder, and a new elector would find
// the Lease free and take it back before the preferred one's next try, again and again
// (each time starting and stopping the shard's clusters). So it leaves the shard to that
// replica for a hold-off of one Lease duration: long enough for the preferred replica's
// elector (every RetryPeriod) to take it; if it does not, any replica contends once the
// Lease has been free for Grace.
type releases struct {
	mu sync.Mutex
	by map[int]release
}

type release struct {
	to string
	at time.Time
}

func (r *releases) note(i int, to string, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.by == nil {
		r.by = map[int]release{}
	}
	r.by[i] = release{to: to, at: at}
}

// heldOff reports whether shard i was released to preferred less than holdOff ago.
func (r *releases) heldOff(i int, preferred string, now time.Time, holdOff time.Duration) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	rel, ok := r.by[i]
	return ok && rel.to == preferred && now.Sub(rel.at) < holdOff
}
