package cli

import (
	"context"
	"encoding/json"
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
	"sigs.k8s.io/yaml"

	"github.com/configmap-attacher/configmap-attacher/internal/cluster"
	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/gc"
	"github.com/configmap-attacher/configmap-attacher/internal/kube"
)

func init() { register(newGCCommand) }

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
	// Output is table (default), json or yaml.
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
	return GCOptions{DryRun: DryRunClient, Output: "table", MinAge: gc.DefaultMinAge, Keep: gc.DefaultKeep, LogFormat: "text"}
}

// AddFlags binds the options to fs.
func (o *GCOptions) AddFlags(fs *pflag.FlagSet) {
	o.ClusterFlags.AddFlags(fs)
	fs.StringVar(&o.DryRun, "dry-run", o.DryRun, `"client" prints the plan and deletes nothing, "server" sends the deletes with dryRun=All, "none" deletes`)
	fs.Lookup("dry-run").NoOptDefVal = DryRunClient
	fs.StringVarP(&o.Output, "output", "o", o.Output, "output format: table, json or yaml")
	fs.DurationVar(&o.MinAge, "gc-min-age", o.MinAge, "grace period: revisions younger than this are kept")
	fs.IntVar(&o.Keep, "gc-keep", o.Keep, "keep the newest N unreferenced revisions of each family")
	fs.BoolVar(&o.BlockOwnerDeletion, "block-owner-deletion", o.BlockOwnerDeletion, "set blockOwnerDeletion on ownerReferences added by repairs")
	addLogFlags(fs, &o.LogLevel, &o.LogFormat, &o.Verbose)
}

// Validate checks the options and returns the parsed selector. Errors are usage errors (exit 2).
func (o *GCOptions) Validate() (labels.Selector, error) {
	switch o.DryRun {
	case DryRunClient, DryRunServer, DryRunNone:
	case "true":
		o.DryRun = DryRunClient
	case "false":
		o.DryRun = DryRunNone
	default:
		return nil, usagef("--dry-run %q: want client, server or none", o.DryRun)
	}
	switch o.Output {
	case "table", "text", "json", "yaml":
	default:
		return nil, usagef("--output %q: want table, json or yaml", o.Output)
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
		Use:   "gc [-n NAMESPACE | -A] [--dry-run=client|server|none] [-o table|json|yaml]",
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

Exit codes: 0 success, 1 failure (one-line reason on stderr), 2 usage error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.Run(cmd.Context(), s) },
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

// GCOutput is what `gc -o json|yaml` prints.
type GCOutput struct {
	DryRun     string       `json:"dryRun"`
	MinAge     gc.Duration  `json:"minAge"`
	Keep       int          `json:"keep"`
	Namespaces []*gc.Report `json:"namespaces"`
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
	if len(targets) == 1 && targets[0].name == "" {
		reps, sweepErr = o.sweep(ctx, log, sel, targets[0])
	} else {
		var mu sync.Mutex
		sweepErr = cluster.Parallel(ctx, targets, o.Parallel, targetName, func(ctx context.Context, t target) error {
			r, err := o.sweep(ctx, log, sel, t)
			mu.Lock()
			reps = append(reps, r...)
			mu.Unlock()
			return err
		})
		sort.SliceStable(reps, func(i, j int) bool { return reps[i].Cluster < reps[j].Cluster })
	}
	out := GCOutput{DryRun: o.DryRun, MinAge: gc.Duration(o.MinAge), Keep: o.Keep, Namespaces: reps}
	if out.Namespaces == nil {
		out.Namespaces = []*gc.Report{}
	}
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
	clients, nss := t.clients, t.nss
	if t.name != "" {
		log = log.With("cluster", t.name)
	}
	cfg := gc.Config{Cluster: t.name, Client: clients.Kube, Logger: log,
		Source:  gc.LiveSource{Client: clients.Kube, Dynamic: clients.Dynamic, Metadata: clients.Metadata, IncludeSecrets: o.IncludeSecrets},
		Options: gc.Options{MinAge: o.MinAge, Keep: o.Keep}, Namespaces: nss, Selector: sel,
		DryRun: o.DryRun == DryRunClient, ServerDryRun: o.DryRun == DryRunServer, AllowSecrets: o.IncludeSecrets}
	if o.DryRun == DryRunNone {
		broadcaster := record.NewBroadcaster(record.WithContext(ctx))
		broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: clients.Kube.CoreV1().Events("")})
		defer broadcaster.Shutdown()
		cfg.Recorder = broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "configmap-attacher"})
		var err error
		cfg.Attacher, err = core.NewAttacher(core.Config{Cluster: t.name, Client: clients.Kube, Recorder: cfg.Recorder,
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
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	case "yaml":
		b, err := yaml.Marshal(out)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := "NAMESPACE\tKIND\tNAME\tFAMILY\tAGE\tDECISION\tREASON"
	if out.DryRun != DryRunClient {
		header = "NAMESPACE\tKIND\tNAME\tFAMILY\tAGE\tDECISION\tRESULT\tREASON"
	}
	withCluster := false
	for _, r := range out.Namespaces {
		withCluster = withCluster || r.Cluster != ""
	}
	if withCluster {
		header = "CLUSTER\t" + header
	}
	fmt.Fprintln(tw, header)
	n := 0
	counts := map[gc.Outcome]int{}
	for _, r := range out.Namespaces {
		for _, it := range r.Results {
			n++
			counts[it.Outcome]++
			age := duration.ShortHumanDuration(now.Sub(it.Created))
			reason := it.Reason
			if it.Error != "" {
				reason += " [" + core.OneLine(it.Error) + "]"
			}
			if withCluster {
				fmt.Fprintf(tw, "%s\t", r.Cluster)
			}
			if out.DryRun == DryRunClient {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Namespace, it.Kind, it.Name, it.Family, age, it.Decision, reason)
			} else {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Namespace, it.Kind, it.Name, it.Family, age, it.Decision, it.Outcome, reason)
			}
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if n == 0 {
		fmt.Fprintln(w, "no opted-in revisions found")
		return nil
	}
	var parts []string
	for _, o := range []gc.Outcome{gc.OutcomeWouldDelete, gc.OutcomeDeleted, gc.OutcomeChanged, gc.OutcomeGone,
		gc.OutcomeWouldRepair, gc.OutcomeRepaired, gc.OutcomeKept, gc.OutcomeError} {
		if counts[o] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[o], o))
		}
	}
	fmt.Fprintf(w, "\n%d revision(s): %s (dry run: %s, min age %s, keep %d)\n", n, strings.Join(parts, ", "), out.DryRun, time.Duration(out.MinAge), out.Keep)
	return nil
}
