package cluster

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
	"github.com/configmap-attacher/configmap-attacher/internal/gc"
)

// Directory is the routing table of the served clusters: for each registered name, the
// Runtime serving it on this replica, or that another replica owns it. It implements
// dispatch.Clusters and dispatch.Sweeps, so that the dispatcher is built on it before
// any cluster runs; the Registry fills it as runtimes start and stop. It is safe for
// concurrent use.
type Directory struct {
	mu     sync.RWMutex
	def    string
	routes map[string]route
	// aliases maps the names of Argo CD Secrets naming the home cluster to its name
	// (homealias.go).
	aliases map[string]string
	// owner returns the identity and forwarding address of the replica owning a cluster
	// not served here ("" none at the moment); nil without a fleet.
	owner func(name string) (identity, address string)
	// pending reports that clusters may still be registered from a first listing (the
	// Argo CD Secrets not admitted yet): an unknown name is then retried, not refused;
	// nil without such a source.
	pending func() bool
	// periodic: sweeps run periodically, so an attach that wrote schedules one.
	periodic bool
}

// route is how one registered cluster is reached: rt serving here (with its health),
// else elsewhere.
type route struct {
	rt     *Runtime
	health func() (down bool, why string)
}

// NewDirectory returns an empty Directory. periodic: the sweepers sweep periodically,
// so that an attach that wrote triggers a sweep of its namespace.
func NewDirectory(periodic bool) *Directory {
	return &Directory{routes: map[string]route{}, periodic: periodic}
}

func (d *Directory) setDefault(name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.def = name
}

func (d *Directory) setOwner(fn func(name string) (identity, address string)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.owner = fn
}

func (d *Directory) setPending(fn func() bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.pending = fn
}

// setAliases makes each name of aliases stand for the cluster it maps to.
func (d *Directory) setAliases(aliases map[string]string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.aliases = aliases
}

// set routes name to rt (nil: registered, served elsewhere).
func (d *Directory) set(name string, r route) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.routes[name] = r
}

// drop forgets name, unless it now routes to another runtime than rt (nil: any).
func (d *Directory) drop(name string, rt *Runtime) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if cur, ok := d.routes[name]; ok && (rt == nil || cur.rt == rt) {
		delete(d.routes, name)
	}
}

// unroute keeps name registered but served elsewhere, unless it now routes to another
// runtime than rt.
func (d *Directory) unroute(name string, rt *Runtime) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if cur, ok := d.routes[name]; ok && cur.rt == rt {
		d.routes[name] = route{}
	}
}

// Runtime returns the runtime serving cluster name here ("" is the default). Errors: an
// unknown name (*core.FieldError for "cluster", core.ErrInvalid), or transient
// (core.ErrUnavailable) while the Argo CD Secrets are not admitted yet; a cluster owned
// by another replica (*dispatch.OwnedElsewhereError, transient).
func (d *Directory) Runtime(name string) (*Runtime, error) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if name == "" {
		name = d.def
	}
	if to, ok := d.aliases[name]; ok {
		name = to
	}
	r, ok := d.routes[name]
	if !ok && d.pending != nil && d.pending() {
		return nil, fmt.Errorf("cluster %q: %w: the Argo CD cluster Secrets are not listed yet; retry", core.Clip(name), core.ErrUnavailable)
	}
	if !ok {
		names := make([]string, 0, len(d.routes))
		for n := range d.routes {
			names = append(names, n)
		}
		sort.Strings(names)
		if len(names) > 10 {
			names = append(names[:10], "…")
		}
		return nil, core.Invalidf("cluster", "unknown cluster %q (registered: %s)", core.Clip(name), strings.Join(names, ", "))
	}
	if r.rt == nil {
		oe := &dispatch.OwnedElsewhereError{Cluster: name}
		if d.owner != nil {
			oe.Identity, oe.Owner = d.owner(name)
		}
		return nil, oe
	}
	if r.health != nil {
		if down, why := r.health(); down {
			return nil, fmt.Errorf("cluster %q: %w: %s", name, core.ErrUnavailable, why)
		}
	}
	return r.rt, nil
}

// Attacher implements dispatch.Clusters: the Attacher of the runtime serving cluster
// name ("" is the default). Errors are Runtime's; a cluster whose last health probe
// failed gives an error wrapping core.ErrUnavailable at once, so that the event is
// retried later instead of waiting for a dead apiserver.
func (d *Directory) Attacher(name string) (*core.Attacher, error) {
	rt, err := d.Runtime(name)
	if err != nil {
		return nil, err
	}
	return rt.Attacher, nil
}

// Sweep implements dispatch.Sweeps: `operation: gc` in the event's cluster. The sweep
// ends with the event or with the cluster's runtime, whichever ends first: a cluster
// removed, re-registered with new credentials or owned elsewhere mid-sweep gets no
// further delete or repair from it.
func (d *Directory) Sweep(ctx context.Context, name, ns string, dryRun bool) (*gc.Report, error) {
	rt, err := d.Runtime(name)
	if err != nil {
		return nil, err
	}
	life := rt.Life()
	if rt.Sweeper == nil || life == nil || !rt.Synced() {
		return nil, fmt.Errorf("cluster %q: %w: its orphan sweeper has not started (caches not synced)", rt.Spec.Name, core.ErrUnavailable)
	}
	ctx, stop := within(life, ctx)
	defer stop()
	run := rt.Sweeper.SweepNamespace
	if dryRun {
		run = rt.Sweeper.SweepNamespaceDryRun
	}
	return run(ctx, ns)
}

// AfterAttach implements dispatch.Sweeps: with periodic sweeps, schedule a sweep of the
// namespace.
func (d *Directory) AfterAttach(name, ns string) {
	if !d.periodic {
		return
	}
	if rt, err := d.Runtime(name); err == nil && rt.Sweeper != nil {
		rt.Sweeper.Trigger(ns)
	}
}

// within returns a context that ends when life ends (at once: a child of life) or when
// ctx ends, with ctx's deadline; stop releases it. No value of ctx is carried.
func within(life, ctx context.Context) (context.Context, func()) {
	out, cancel := context.WithCancelCause(life)
	if dl, ok := ctx.Deadline(); ok {
		var cancelDeadline context.CancelFunc
		out, cancelDeadline = context.WithDeadline(out, dl)
		prev := cancel
		cancel = func(err error) { cancelDeadline(); prev(err) }
	}
	release := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	return out, func() { release(); cancel(nil) }
}
