package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/configmap-attacher/configmap-attacher/internal/cluster"
	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/gc"
	"github.com/configmap-attacher/configmap-attacher/internal/inspect"
)

var statusOutputs = []string{OutputText, OutputWide, OutputJSON, OutputYAML}

// StatusOptions are the flags of `configmap-attacher status`.
type StatusOptions struct {
	ClusterFlags
	// Output is text (a tree, default) or json.
	Output string
	// Watch re-renders whenever the status changes, polling every Interval.
	Watch    bool
	Interval time.Duration
	// MinAge and Keep classify orphans as the gc command would.
	MinAge time.Duration
	Keep   int
	// Logging: quiet unless -v or --log-level.
	LogLevel, LogFormat string
	Verbose             int
	// ExitCode makes status exit ExitMissingConfig when a live workload references
	// config that does not exist (status_exitcode.go).
	ExitCode bool
}

// DefaultStatusOptions returns the defaults: text output, 2s watch interval, gc defaults.
func DefaultStatusOptions() StatusOptions {
	return StatusOptions{Output: "text", Interval: 2 * time.Second, MinAge: gc.DefaultMinAge, Keep: gc.DefaultKeep, LogFormat: "text"}
}

// AddFlags binds the options to fs.
func (o *StatusOptions) AddFlags(fs *pflag.FlagSet) {
	o.ClusterFlags.AddFlags(fs)
	addOutputFlag(fs, &o.Output, statusOutputs...)
	fs.BoolVarP(&o.Watch, "watch", "w", o.Watch, "re-render whenever the status changes (Ctrl-C to stop)")
	fs.DurationVar(&o.Interval, "interval", o.Interval, "how often --watch reads the cluster")
	fs.DurationVar(&o.MinAge, "gc-min-age", o.MinAge, "grace period used to classify orphans (as gc)")
	fs.IntVar(&o.Keep, "gc-keep", o.Keep, "keep-N used to classify orphans (as gc)")
	addLogFlags(fs, &o.LogLevel, &o.LogFormat, &o.Verbose)
	fs.BoolVar(&o.ExitCode, "exit-code", o.ExitCode, "exit 3 when a live workload references config that does not exist (MISSING), for CI")
}

// Validate checks the options; errors are usage errors (exit 2).
func (o *StatusOptions) Validate() (labels.Selector, error) {
	if o.ExitCode && o.Watch {
		return nil, usagef("--exit-code and --watch are exclusive")
	}
	if err := validOutput(&o.Output, statusOutputs...); err != nil {
		return nil, err
	}
	if o.Interval <= 0 {
		return nil, usagef("--interval must be positive")
	}
	if err := (gc.Options{MinAge: o.MinAge, Keep: o.Keep}).Validate(); err != nil {
		return nil, usageError{err}
	}
	return o.ClusterFlags.validate()
}

func newStatusCommand(s *Streams) *cobra.Command {
	o := DefaultStatusOptions()
	cmd := &cobra.Command{
		Use:   "status [-n NAMESPACE | -A] [-o text|wide|json|yaml] [--watch]",
		Short: "Show, per workload, which ReplicaSet owns which config revision, and the orphans",
		Long: `status prints a tree per workload: workload -> ReplicaSets (revision, pod hash,
ready/desired replicas, age) -> the revisions each owns, and the revisions each uses
without owning them; then the revisions referenced but not attached, and the orphans
(referenced by nothing, owned by nothing live) with what gc would do with them.

Exit codes: 0 success, 1 failure (one-line reason on stderr), 2 usage error,
3 with --exit-code: a live workload references config that does not exist (MISSING),
130/143 interrupted by SIGINT/SIGTERM (docs/cli.md).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.Run(cmd.Context(), s) },
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

// Run prints the status once, or with --watch every time it changes until ctx ends.
func (o *StatusOptions) Run(ctx context.Context, s *Streams) error {
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
	v, err := o.newStatusView(targets, sel, s.Out)
	if err != nil {
		return err
	}
	out, failed := v.render(ctx)
	if out == nil {
		return failed
	}
	if _, err := s.Out.Write(out); err != nil {
		return err
	}
	if !o.Watch {
		if o.ExitCode {
			return exitCodeResult(failed, v.missing)
		}
		return failed
	}
	if failed != nil {
		fmt.Fprintln(s.Err, "status: "+core.OneLine(failed.Error())+" (retrying)")
	}
	return o.watch(ctx, s, v, out)
}

// statusView reads the status of every target cluster and renders it in one format.
type statusView struct {
	output     string
	parallel   int
	names      []string
	inspectors []*inspect.Inspector
	// multi is set when several clusters were asked for (each is then named).
	multi bool
	// out is where the rendering goes: colours only on a terminal.
	out io.Writer
	// missing is the MISSING config of the last render, for --exit-code.
	missing []string
}

// newStatusView builds one inspector per target, with the command's options.
func (o *StatusOptions) newStatusView(targets []target, sel labels.Selector, out io.Writer) (*statusView, error) {
	v := &statusView{output: o.Output, parallel: o.Parallel, multi: len(targets) > 1 || targets[0].name != "", out: out}
	for _, t := range targets {
		in, err := inspect.New(inspect.Config{Cluster: t.name, Clients: t.clients, Namespaces: t.nss, Selector: sel,
			IncludeSecrets: o.IncludeSecrets, Options: gc.Options{MinAge: o.MinAge, Keep: o.Keep}})
		if err != nil {
			return nil, err
		}
		v.names = append(v.names, t.name)
		v.inspectors = append(v.inspectors, in)
	}
	return v, nil
}

// render reads every cluster and renders the reports. With one cluster, its failure is
// returned alone (nil output); with several, the output holds the clusters that
// answered and the error names those that did not.
func (v *statusView) render(ctx context.Context) ([]byte, error) {
	perCluster := make([][]inspect.Report, len(v.inspectors))
	idx := make([]int, len(v.inspectors))
	for i := range idx {
		idx[i] = i
	}
	errs := make([]error, len(v.inspectors))
	failed := cluster.Parallel(ctx, idx, v.parallel, func(i int) string { return v.names[i] }, func(ctx context.Context, i int) error {
		perCluster[i], errs[i] = v.inspectors[i].Reports(ctx)
		return errs[i]
	})
	if failed != nil && !v.multi {
		return nil, errs[0] // the single cluster's own error, without a cluster prefix
	}
	v.missing = missingConfig(perCluster, v.multi)
	out, err := v.format(perCluster, failed == nil)
	if err != nil {
		return nil, err
	}
	return out, failed
}

// format writes the clusters' reports as text (each cluster named when there are
// several, namespaces apart) or as one JSON or YAML list. ok says every cluster answered.
func (v *statusView) format(perCluster [][]inspect.Report, ok bool) ([]byte, error) {
	var buf bytes.Buffer
	reps := []inspect.Report{}
	now := time.Now()
	pal := palette(useColor(v.out))
	rendered := 0
	for i, name := range v.names {
		if v.multi && !structured(v.output) {
			if rendered > 0 {
				buf.WriteString("\n")
			}
			rendered = 0
			fmt.Fprintf(&buf, "Cluster: %s\n", name)
		}
		for _, rep := range perCluster[i] {
			if structured(v.output) {
				reps = append(reps, rep)
				continue
			}
			if rendered++; rendered > 1 {
				buf.WriteString("\n") // namespaces apart
			}
			renderStatus(&buf, rep, now, pal)
		}
		if len(perCluster[i]) == 0 && !structured(v.output) && (v.multi || ok) {
			buf.WriteString("no opted-in revisions found in any namespace; status -n NAMESPACE shows what its workloads reference and how to opt it in\n")
		}
	}
	if _, err := writeStructured(&buf, v.output, reps); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// watch re-renders every --interval and prints the status again when it changed (ages
// aside), until ctx ends; last is what was printed first.
func (o *StatusOptions) watch(ctx context.Context, s *Streams, v *statusView, last []byte) error {
	tty := isTerminal(s.Out)
	t := time.NewTicker(o.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		out, err := v.render(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			fmt.Fprintln(s.Err, "status: "+core.OneLine(err.Error())+" (retrying)")
			if out == nil {
				continue
			}
		}
		if sameStatus(o.Output, out, last) {
			continue
		}
		last = out
		o.watchSeparator(s.Out, tty)
		if _, err := s.Out.Write(out); err != nil {
			return err
		}
	}
}

// sameStatus reports whether two renderings differ in their ages only.
func sameStatus(output string, a, b []byte) bool {
	if structured(output) {
		return bytes.Equal(stripJSONAges(a), stripJSONAges(b))
	}
	return bytes.Equal(stripAges(a), stripAges(b))
}

// watchSeparator starts a new rendering: a cleared screen on a terminal, else a line
// between documents (none between JSON documents, as kubectl get --watch -o json).
func (o *StatusOptions) watchSeparator(w io.Writer, tty bool) {
	switch {
	case tty:
		fmt.Fprint(w, "\033[H\033[2J")
	case o.Output == OutputJSON:
		// a stream of JSON documents, as kubectl get --watch -o json prints
	case o.Output == OutputYAML:
		fmt.Fprintln(w, "---")
	default:
		fmt.Fprintf(w, "--- %s\n", time.Now().UTC().Format(time.RFC3339))
	}
}

// stripAges drops the age fields so that --watch re-renders on changes, not on ticks.
func stripAges(b []byte) []byte {
	var out [][]byte
	for _, f := range bytes.Fields(b) {
		if !bytes.HasPrefix(f, []byte("age:")) {
			out = append(out, f)
		}
	}
	return bytes.Join(out, []byte(" "))
}

// stripJSONAges drops the age lines of indented JSON or YAML, for the same reason.
func stripJSONAges(b []byte) []byte {
	var out [][]byte
	for _, l := range bytes.Split(b, []byte("\n")) {
		if t := bytes.TrimSpace(l); !bytes.HasPrefix(t, []byte(`"ageSeconds":`)) && !bytes.HasPrefix(t, []byte(`ageSeconds:`)) {
			out = append(out, l)
		}
	}
	return bytes.Join(out, []byte("\n"))
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
