package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/configmap-attacher/configmap-attacher/internal/cluster"
	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
	"github.com/configmap-attacher/configmap-attacher/internal/gc"
	"github.com/configmap-attacher/configmap-attacher/internal/inspect"
	"github.com/configmap-attacher/configmap-attacher/internal/kube"
)

var gcOutputs = []string{OutputText, OutputWide, OutputJSON, OutputYAML, OutputName}

// Dry-run modes of `gc --dry-run`, kubectl's convention.
const (
	DryRunClient = "client"
	DryRunServer = "server"
	DryRunNone   = "none"
)

// ClusterFlags select the cluster and namespaces; shared by gc and status.
type ClusterFlags struct {
	Kubeconfig, Context string
	InCluster           bool
	Namespace           string
	AllNamespaces       bool
	Selector            string
	IncludeSecrets      bool
	// MultiClusterFlags select several clusters (clusters.go).
	MultiClusterFlags
}

// AddFlags binds the flags to fs.
func (c *ClusterFlags) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.Kubeconfig, "kubeconfig", c.Kubeconfig, "kubeconfig file (default $KUBECONFIG or ~/.kube/config, then in-cluster)")
	fs.StringVar(&c.Context, "context", c.Context, "kubeconfig context")
	fs.StringVarP(&c.Namespace, "namespace", "n", c.Namespace, "namespace (default: the kubeconfig context's)")
	fs.BoolVarP(&c.AllNamespaces, "all-namespaces", "A", c.AllNamespaces, "every namespace that holds an opted-in revision")
	fs.StringVarP(&c.Selector, "selector", "l", c.Selector, "only revisions whose labels match this selector (families are still ranked whole)")
	fs.BoolVar(&c.IncludeSecrets, "include-secrets", c.IncludeSecrets, "also consider opted-in Secrets (metadata only)")
	c.MultiClusterFlags.addFlags(fs)
}

func (c *ClusterFlags) validate() (labels.Selector, error) {
	if c.AllNamespaces && c.Namespace != "" {
		return nil, usagef("--namespace and --all-namespaces are exclusive")
	}
	if err := c.MultiClusterFlags.validate(); err != nil {
		return nil, err
	}
	sel, err := labels.Parse(c.Selector)
	if err != nil {
		return nil, usagef("--selector: %v", err)
	}
	return sel, nil
}

func (c *ClusterFlags) connect(ctx context.Context) (*kube.Clients, []string, error) {
	opts := kube.ConfigOptions{Kubeconfig: c.Kubeconfig, Context: c.Context, InCluster: c.InCluster}
	cfg, err := kube.RESTConfig(opts)
	if err != nil {
		return nil, nil, err
	}
	clients, err := kube.NewClients(cfg)
	if err != nil {
		return nil, nil, err
	}
	if c.AllNamespaces {
		return clients, nil, nil
	}
	ns := c.Namespace
	if ns == "" {
		if ns, err = kube.ContextNamespace(opts); err != nil {
			return nil, nil, err
		}
	}
	return clients, []string{ns}, checkNamespace(ctx, clients.Kube, ns)
}

// GCOptions are the flags of `configmap-attacher gc`.
type GCOptions struct {
	ClusterFlags
	// DryRun is client (default: plan only), server (deletes sent with dryRun=All) or none.
	DryRun string
	// Output is text (a table, default; "table" too), wide, json, yaml or name.
	Output             string
	MinAge             time.Duration
	Keep               int
	BlockOwnerDeletion bool
	LogLevel           string
	LogFormat          string
	Verbose            int
}

// DefaultGCOptions returns the defaults: client dry run, table output, gc.DefaultMinAge, gc.DefaultKeep.
func DefaultGCOptions() GCOptions {
	return GCOptions{DryRun: DryRunClient, Output: OutputText, MinAge: gc.DefaultMinAge, Keep: gc.DefaultKeep, LogFormat: "text"}
}

// AddFlags binds the options to fs.
func (o *GCOptions) AddFlags(fs *pflag.FlagSet) {
	o.ClusterFlags.AddFlags(fs)
	addDryRunFlag(fs, &o.DryRun, "deletes and repairs")
	addOutputFlag(fs, &o.Output, gcOutputs...)
	fs.DurationVar(&o.MinAge, "gc-min-age", o.MinAge, "grace period: revisions younger than this are kept")
	fs.IntVar(&o.Keep, "gc-keep", o.Keep, "keep the newest N unreferenced revisions of each family (its ConfigMaps and its Secrets each)")
	fs.BoolVar(&o.BlockOwnerDeletion, "block-owner-deletion", o.BlockOwnerDeletion, "set blockOwnerDeletion on ownerReferences added by repairs")
	addLogFlags(fs, &o.LogLevel, &o.LogFormat, &o.Verbose)
}

// Validate checks the options and returns the parsed selector. Errors are usage errors (exit 2).
func (o *GCOptions) Validate() (labels.Selector, error) {
	if o.DryRun == "" {
		o.DryRun = DryRunClient // gc plans unless told to delete
	}
	if err := validDryRun(&o.DryRun); err != nil {
		return nil, err
	}
	if err := validOutput(&o.Output, gcOutputs...); err != nil {
		return nil, err
	}
	if err := (gc.Options{MinAge: o.MinAge, Keep: o.Keep}).Validate(); err != nil {
		var fe *core.FieldError
		if errors.As(err, &fe) {
			return nil, usagef("--%s: %s", fe.Field, fe.Msg)
		}
		return nil, usageError{err}
	}
	return o.ClusterFlags.validate()
}

func newGCCommand(s *Streams) *cobra.Command {
	o := DefaultGCOptions()
	cmd := &cobra.Command{
		Use:   "gc [-n NAMESPACE | -A] [--dry-run=client|server|none] [-o text|wide|json|yaml|name]",
		Short: "Plan (and with --dry-run=none, carry out) the orphan sweep once",
		Long: `gc lists every opted-in revision (label configmap-attacher.io/revision=true) and
decides whether it is deleted, kept or repaired (attached to the
ReplicaSets that use it), and why.

A revision is deleted only when no ReplicaSet, Deployment, Rollout, StatefulSet,
DaemonSet, Job, CronJob or Pod references it, no live object owns it, it is older
than --gc-min-age, it is not among the newest --gc-keep unreferenced revisions of its
family, and it has no configmap-attacher.io/skip=true annotation. Deletes carry the
UID and resourceVersion seen, so an object changed meanwhile is not deleted.

Dry run by default: the plan printed is exactly what --dry-run=none then deletes if
nothing changes in between.

Exit codes: 0 success, 1 failure (one-line reason on stderr), 2 usage error,
130/143 interrupted by SIGINT/SIGTERM (docs/cli.md).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.Run(cmd.Context(), s) },
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

// GCOutput is what `gc -o json|yaml` prints. Durations are in seconds; dryRun is
// none, client or server wherever it appears; a cluster is named as the service names
// it ("in-cluster" for the one of --kubeconfig/--context).
type GCOutput struct {
	DryRun        string        `json:"dryRun"`
	MinAgeSeconds int64         `json:"minAgeSeconds"`
	Keep          int           `json:"keep"`
	Namespaces    []GCNamespace `json:"namespaces"`
	// multi is set when several clusters were asked for (the table gets a CLUSTER column).
	multi bool
}

// GCNamespace is one namespace's sweep.
type GCNamespace struct {
	Cluster   string             `json:"cluster"`
	Namespace string             `json:"namespace"`
	DryRun    string             `json:"dryRun"`
	Results   []inspect.PlanItem `json:"results"`
	// AttachedByName are objects a ReplicaSet owns that carry no opt-in label (listed by
	// an annotation or a command line): never swept, deleted by the garbage collector
	// with their last owner.
	AttachedByName []string `json:"attachedByName,omitempty"`
}

func newGCOutput(dryRun string, minAge time.Duration, keep int, reps []*gc.Report, byName map[*gc.Report][]string, multi bool) GCOutput {
	out := GCOutput{DryRun: dryRun, MinAgeSeconds: int64(minAge / time.Second), Keep: keep, Namespaces: []GCNamespace{}, multi: multi}
	for _, r := range reps {
		ns := GCNamespace{Cluster: clusterOrDefault(r.Cluster), Namespace: r.Namespace, DryRun: dryRun, Results: []inspect.PlanItem{},
			AttachedByName: byName[r]}
		for _, it := range r.Results {
			g := inspect.NewPlanItem(it.Item, it.Outcome)
			g.Error = it.Error
			ns.Results = append(ns.Results, g)
		}
		out.Namespaces = append(out.Namespaces, ns)
	}
	return out
}

// clusterOrDefault names the cluster of --kubeconfig/--context as serve does.
func clusterOrDefault(name string) string {
	if name == "" {
		return dispatch.DefaultClusterName
	}
	return name
}

// Run sweeps the selected namespaces once and prints the result. It returns a usage
// error for bad options and a one-line error when any namespace failed.
func (o *GCOptions) Run(ctx context.Context, s *Streams) error {
	sel, err := o.Validate()
	if err != nil {
		return err
	}
	log, err := NewLogger(s.Err, logLevel(o.LogLevel, o.Verbose), o.LogFormat)
	if err != nil {
		return err
	}
	targets, err := o.targets(ctx, log)
	if err != nil {
		return err
	}
	var reps []*gc.Report
	var sweepErr error
	byName := map[*gc.Report][]string{}
	var mu sync.Mutex
	one := func(ctx context.Context, t target) error {
		r, err := o.sweep(ctx, log, sel, t)
		names := make([][]string, len(r))
		for i := range r {
			names[i] = inspect.AttachedByName(ctx, t.clients.Metadata, r[i].Namespace, o.IncludeSecrets)
		}
		mu.Lock()
		defer mu.Unlock()
		reps = append(reps, r...)
		for i := range r {
			byName[r[i]] = names[i]
		}
		return err
	}
	if len(targets) == 1 && targets[0].name == "" {
		sweepErr = one(ctx, targets[0])
	} else {
		sweepErr = cluster.Parallel(ctx, targets, o.Parallel, targetName, one)
		sort.SliceStable(reps, func(i, j int) bool { return reps[i].Cluster < reps[j].Cluster })
	}
	out := newGCOutput(o.DryRun, o.MinAge, o.Keep, reps, byName, len(targets) > 1 || targets[0].name != "")
	if err := printGC(s.Out, o.Output, &out, time.Now()); err != nil {
		return err
	}
	if sweepErr != nil {
		return sweepErr
	}
	summary := map[gc.Outcome]int{}
	for _, r := range reps {
		for _, it := range r.Results {
			summary[it.Outcome]++
		}
	}
	log.Debug("gc done", slog.Any("outcomes", summary))
	return nil
}

// sweep sweeps the namespaces of one cluster once.
func (o *GCOptions) sweep(ctx context.Context, log *slog.Logger, sel labels.Selector, t target) ([]*gc.Report, error) {
	clients, nss := t.clients, t.nss // the sweeper and the Attacher name the cluster in their logs
	cfg := gc.Config{Cluster: t.name, Client: clients.Kube, Logger: log,
		Source:  gc.LiveSource{Client: clients.Kube, Dynamic: clients.Dynamic, Metadata: clients.Metadata, IncludeSecrets: o.IncludeSecrets},
		Options: gc.Options{MinAge: o.MinAge, Keep: o.Keep}, Namespaces: nss, Selector: sel,
		DryRun: o.DryRun == DryRunClient, ServerDryRun: o.DryRun == DryRunServer, AllowSecrets: o.IncludeSecrets,
		Clock: clients.Clock.Now}
	if o.DryRun == DryRunNone {
		broadcaster := record.NewBroadcaster(record.WithContext(ctx))
		broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: clients.Kube.CoreV1().Events("")})
		defer broadcaster.Shutdown()
		cfg.Recorder = broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "configmap-attacher"})
		var err error
		cfg.Attacher, err = core.NewAttacher(core.Config{Cluster: t.name, Client: clients.Kube, Metadata: clients.Metadata, Recorder: cfg.Recorder,
			Reader:             core.LiveReader{Client: clients.Kube, Dynamic: clients.Dynamic, Metadata: clients.Metadata},
			BlockOwnerDeletion: o.BlockOwnerDeletion, AllowSecrets: o.IncludeSecrets, Logger: log})
		if err != nil {
			return nil, err
		}
	}
	sw, err := gc.NewSweeper(cfg)
	if err != nil {
		return nil, err
	}
	return sw.SweepAll(ctx)
}

func printGC(w io.Writer, format string, out *GCOutput, now time.Time) error {
	if ok, err := writeStructured(w, format, out); ok {
		return err
	}
	n := 0
	counts := map[gc.Outcome]int{}
	for _, r := range out.Namespaces {
		for _, it := range r.Results {
			n++
			counts[it.Outcome]++
			if format == OutputName && (it.Outcome == gc.OutcomeWouldDelete || it.Outcome == gc.OutcomeDeleted) {
				// only what was (or in a dry run would be) deleted, as kubectl's -o name:
				// piping it to `kubectl delete` never names a kept or live revision.
				fmt.Fprintf(w, "%s/%s\n", strings.ToLower(string(it.Kind)), it.Name)
			}
		}
	}
	if format == OutputName {
		return nil
	}
	defer explainByName(w, out)
	if n == 0 {
		fmt.Fprintln(w, "no opted-in revisions found")
		return nil
	}
	if err := gcTable(w, format, out, now); err != nil {
		return err
	}
	var parts []string
	for _, o := range []gc.Outcome{gc.OutcomeWouldDelete, gc.OutcomeDeleted, gc.OutcomeChanged, gc.OutcomeGone,
		gc.OutcomeWouldRepair, gc.OutcomeRepaired, gc.OutcomeKept, gc.OutcomeError} {
		if counts[o] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[o], o))
		}
	}
	fmt.Fprintf(w, "\n%d revision(s): %s (dry run: %s, min age %s, keep %d)\n", n, strings.Join(parts, ", "), out.DryRun,
		time.Duration(out.MinAgeSeconds)*time.Second, out.Keep)
	return nil
}

// explainByName says why objects attached by name are not in the plan.
func explainByName(w io.Writer, out *GCOutput) {
	var all []string
	for _, r := range out.Namespaces {
		for _, n := range r.AttachedByName {
			all = append(all, r.Namespace+"/"+n)
		}
	}
	if len(all) > 0 {
		fmt.Fprintf(w, "not swept: %s: attached by name without the %s=true label; the garbage collector deletes each with its last owner (label it to let gc collect it once unused)\n",
			strings.Join(all, ", "), core.LabelRevision)
	}
}

// gcTable writes the plan's table (never an empty one); wide adds the owners and the
// referencing objects.
func gcTable(w io.Writer, format string, out *GCOutput, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	cols := []string{"NAMESPACE", "KIND", "NAME", "FAMILY", "AGE", "DECISION"}
	if out.DryRun != DryRunClient {
		cols = append(cols, "RESULT")
	}
	cols = append(cols, "REASON")
	if format == OutputWide {
		cols = append(cols, "REFERENCED-BY", "OWNERS")
	}
	if out.multi {
		cols = append([]string{"CLUSTER"}, cols...)
	}
	fmt.Fprintln(tw, strings.Join(cols, "\t"))
	for _, r := range out.Namespaces {
		for _, it := range r.Results {
			reason := it.Reason
			if it.Error != "" {
				reason += " [" + core.OneLine(it.Error) + "]"
			}
			row := []string{r.Namespace, string(it.Kind), it.Name, it.Family, duration.ShortHumanDuration(now.Sub(it.Created)), string(it.Decision)}
			if out.DryRun != DryRunClient {
				row = append(row, string(it.Outcome))
			}
			row = append(row, reason)
			if format == OutputWide {
				row = append(row, dash(strings.Join(it.ReferencedBy, ",")), dash(strings.Join(it.Owners, ",")))
			}
			if out.multi {
				row = append([]string{r.Cluster}, row...)
			}
			fmt.Fprintln(tw, strings.Join(row, "\t"))
		}
	}
	return tw.Flush()
}
