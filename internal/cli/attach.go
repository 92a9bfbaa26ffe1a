package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
	"github.com/configmap-attacher/configmap-attacher/internal/inspect"
	"github.com/configmap-attacher/configmap-attacher/internal/kube"
)

var attachOutputs = []string{OutputText, OutputWide, OutputJSON, OutputYAML, OutputName}

// AttachOptions are the flags of `configmap-attacher attach` and of the legacy
// one-shot Job form.
type AttachOptions struct {
	Rollout, Deployment, ReplicaSet string
	Namespace                       string
	ConfigMaps, Secrets             string
	Kubeconfig, Context             string
	InCluster                       bool
	Timeout                         time.Duration
	Interval                        time.Duration
	Output                          string
	// DryRun is none (default), client or server (docs/cli.md).
	DryRun              string
	Discover            bool
	Selector            string
	IncludeSecrets      bool
	BlockOwnerDeletion  bool
	LogLevel, LogFormat string
	Verbose             int
	// Cluster (--cluster) names the cluster: a kubeconfig context, or with
	// ArgoCDNamespace (--argocd-clusters) an Argo CD cluster Secret's cluster.
	// Clusters holds the flag's values: attach works in one.
	Cluster         string
	Clusters        []string
	ArgoCDNamespace string
	// ExecPlugins (--allow-exec-plugin) are the credential plugins Argo CD cluster
	// Secrets may run.
	ExecPlugins []string

	// legacy marks the old Job's form: only the listed names are attached.
	legacy bool
}

// flag spells a flag as the form in use does: -name in the old Job's, --name otherwise.
func (o *AttachOptions) flag(name string) string {
	if o.legacy {
		return "-" + name
	}
	return "--" + name
}

// DefaultAttachOptions returns the defaults shared by both forms.
func DefaultAttachOptions() AttachOptions {
	return AttachOptions{Timeout: 5 * time.Minute, Interval: time.Second, Output: OutputText, DryRun: DryRunNone, Discover: true,
		Selector: core.DefaultSelector, LogFormat: "text"}
}

// AddFlags binds the options to a flag set.
func (o *AttachOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Rollout, "rollout", o.Rollout, "Argo Rollout whose current ReplicaSet becomes the owner")
	fs.StringVar(&o.Deployment, "deployment", o.Deployment, "Deployment whose current ReplicaSet becomes the owner")
	fs.StringVar(&o.ReplicaSet, "replicaset", o.ReplicaSet, "ReplicaSet that becomes the owner")
	fs.StringVarP(&o.Namespace, "namespace", "n", o.Namespace, "namespace of the workload (default: the kubeconfig context's)")
	fs.StringVar(&o.ConfigMaps, "configmaps", o.ConfigMaps, "comma list of ConfigMap names to attach (trusted: need no opt-in label)")
	fs.StringVar(&o.Secrets, "secrets", o.Secrets, "comma list of Secret names to attach (implies --include-secrets)")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig file (default $KUBECONFIG or ~/.kube/config, then in-cluster)")
	fs.StringVar(&o.Context, "context", o.Context, "kubeconfig context")
	fs.DurationVar(&o.Timeout, "timeout", o.Timeout, "how long to wait for the workload's current ReplicaSet")
	addOutputFlag(fs, &o.Output, attachOutputs...)
	addDryRunFlag(fs, &o.DryRun, "attaches")
	fs.BoolVar(&o.Discover, "discover", o.Discover, "also attach opted-in objects the pod template references")
	fs.StringVarP(&o.Selector, "selector", "l", o.Selector, "label selector a discovered object must match")
	fs.BoolVar(&o.IncludeSecrets, "include-secrets", o.IncludeSecrets, "also attach opted-in Secrets")
	fs.BoolVar(&o.BlockOwnerDeletion, "block-owner-deletion", o.BlockOwnerDeletion, "set blockOwnerDeletion (needs delete rights on ReplicaSets/finalizers)")
	addLogFlags(fs, &o.LogLevel, &o.LogFormat, &o.Verbose)
	fs.StringArrayVar(&o.Clusters, "cluster", o.Clusters, clusterFlagHelp+" (attach: one)")
	fs.StringVar(&o.ArgoCDNamespace, "argocd-clusters", o.ArgoCDNamespace, argoCDFlagHelp)
	addExecPluginFlag(fs, &o.ExecPlugins)
}

// Validate checks the options and returns the workload kind and name to resolve.
func (o *AttachOptions) Validate() (kind, name string, opts core.Options, err error) {
	set := 0
	for _, c := range []struct{ k, v string }{{core.RolloutKind, o.Rollout}, {"Deployment", o.Deployment}, {"ReplicaSet", o.ReplicaSet}} {
		if c.v != "" {
			set++
			kind, name = c.k, c.v
		}
	}
	switch {
	case set != 1 && o.legacy:
		return "", "", opts, usagef("-rollout is required")
	case set != 1:
		return "", "", opts, usagef("exactly one of --rollout, --deployment or --replicaset is required")
	}
	if err := core.ValidateName(name); err != nil {
		return "", "", opts, usagef("%s name: %v", strings.ToLower(kind), err)
	}
	if o.Namespace != "" {
		if errs := validation.IsDNS1123Label(o.Namespace); len(errs) > 0 {
			return "", "", opts, usagef("namespace %q: %s", o.Namespace, strings.Join(errs, "; "))
		}
	}
	if err := validOutput(&o.Output, attachOutputs...); err != nil {
		return "", "", opts, err
	}
	if err := validDryRun(&o.DryRun); err != nil {
		return "", "", opts, err
	}
	switch len(o.Clusters) {
	case 0:
	case 1:
		o.Cluster = o.Clusters[0]
	default:
		return "", "", opts, usagef("--cluster: attach works in one cluster, got %d", len(o.Clusters))
	}
	if o.Timeout <= 0 {
		return "", "", opts, usagef("%s must be positive", o.flag("timeout"))
	}
	spec := map[string]string{
		core.SpecConfigMaps: o.ConfigMaps, core.SpecSecrets: o.Secrets, core.SpecSelector: o.Selector,
		core.SpecDiscover: fmt.Sprint(o.Discover), core.SpecDryRun: fmt.Sprint(o.DryRun == DryRunClient),
		core.SpecIncludeSecrets: fmt.Sprint(o.IncludeSecrets || o.Secrets != ""),
	}
	opts, err = core.ParseSpec(spec)
	if err != nil {
		var fe *core.FieldError
		if errors.As(err, &fe) {
			return "", "", opts, usagef("%s: %s", o.flag(flagName(fe.Field)), fe.Msg)
		}
		return "", "", opts, usageError{err}
	}
	if o.legacy && opts.ConfigMaps == nil {
		return "", "", opts, usagef("-configmaps is required")
	}
	if (opts.ConfigMaps != nil || opts.Secrets != nil) && inCredentialPlugin() {
		return "", "", opts, usagef("%s and %s are trusted only from a person's command line: refused in a process started as a Kubernetes credential plugin (%s is set)",
			o.flag("configmaps"), o.flag("secrets"), execInfoEnv)
	}
	// The list comes from the user's own command line and the command runs with the
	// user's own credentials: listed objects need no opt-in label (docs/safety.md).
	opts.TrustListedNames = true
	return kind, name, opts, nil
}

func flagName(specKey string) string {
	switch specKey {
	case core.SpecConfigMaps:
		return "configmaps"
	case core.SpecIncludeSecrets:
		return "include-secrets"
	}
	return specKey
}

func newAttachCommand(s *Streams) *cobra.Command {
	o := DefaultAttachOptions()
	cmd := &cobra.Command{
		Use:   "attach (--rollout R | --deployment D | --replicaset RS) [-n NAMESPACE] [--configmaps a,b]",
		Short: "Attach config revisions to a workload's current ReplicaSet, once",
		Long: `attach waits (bounded by --timeout) for the workload's current ReplicaSet, then adds
it as an owner of every listed ConfigMap/Secret and every opted-in one its pod
template references. Existing owners are kept. With listed names it waits for the
ReplicaSet whose pod template uses them, never attaching them to an older one
(names no template uses go to the current ReplicaSet, as the old Job did). Where
waiting cannot help it fails at once: an apiserver that does not answer, a workload
that does not exist, a listed name newer than the current ReplicaSet that no spec
uses once the controller has caught up (docs/safety.md).

Exit codes: 0 success, 1 failure (one-line reason on stderr), 2 usage error,
130/143 interrupted by SIGINT/SIGTERM (docs/cli.md).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.Run(cmd.Context(), s)
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

// runLegacy parses the old Job's single-dash arguments and its environment
// (VERSION, JOB_NAME, LOG_LEVEL, IS_IN_CLUSTER) and runs attach with them.
func runLegacy(ctx context.Context, args []string, s *Streams) error {
	o := DefaultAttachOptions()
	o.legacy = true
	o.Discover = false // the old Job attached exactly the listed ConfigMaps
	o.LogLevel = envOr("LOG_LEVEL", o.LogLevel)
	o.InCluster = strings.EqualFold(envOr("IS_IN_CLUSTER", "false"), "true")
	fs := flag.NewFlagSet("configmap-attacher", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // the error is printed once, by Main; -h prints the usage below
	fs.StringVar(&o.Rollout, "rollout", "", "Argo Rollout whose current ReplicaSet becomes the owner")
	fs.StringVar(&o.Namespace, "namespace", "", "namespace of the Rollout")
	fs.StringVar(&o.ConfigMaps, "configmaps", "", "comma list of ConfigMap names to attach")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig file (when IS_IN_CLUSTER is not true)")
	fs.DurationVar(&o.Timeout, "timeout", o.Timeout, "how long to wait for the Rollout's current ReplicaSet")
	verbose := fs.Bool("v", false, "log at info on stderr (LOG_LEVEL sets the level too)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(s.Out)
			fmt.Fprintln(s.Out, "Usage (the old Job's form): configmap-attacher -rollout R -namespace N -configmaps a,b")
			fs.PrintDefaults()
			return nil
		}
		return usageError{legacyFlagError(err)}
	}
	if *verbose && o.LogLevel == "" {
		o.LogLevel = "info"
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	if o.Namespace == "" {
		return usagef("-namespace is required")
	}
	return o.Run(ctx, s)
}

// legacyFlagError adds a suggestion to the flag package's "flag provided but not
// defined: -x" error; a dry run, which the old form never had, is pointed to attach's.
func legacyFlagError(err error) error {
	const undefined = "flag provided but not defined: -"
	msg := err.Error()
	if !strings.HasPrefix(msg, undefined) {
		return err
	}
	name := strings.TrimPrefix(msg, undefined)
	if name == "dry-run" {
		return fmt.Errorf("%w (the old Job's form has no --dry-run: use configmap-attacher attach --rollout R -n N --configmaps a,b --dry-run=server)", err)
	}
	if s := suggest(name, legacyFlags); s != "" {
		return fmt.Errorf("%w (did you mean -%s?)", err, s)
	}
	return err
}

// Run resolves the workload's current ReplicaSet and attaches. It returns a usage error
// for bad options and a one-line error for failures.
func (o *AttachOptions) Run(ctx context.Context, s *Streams) error {
	kind, name, opts, err := o.Validate()
	if err != nil {
		return err
	}
	log, err := NewLogger(s.Err, logLevel(o.LogLevel, o.Verbose), o.LogFormat)
	if err != nil {
		return err
	}
	if job := envOr("JOB_NAME", ""); job != "" || envOr("VERSION", "") != "" {
		log = log.With("job", job, "jobVersion", envOr("VERSION", ""))
	}
	clients, ns, err := o.connect(ctx)
	if err != nil {
		return err
	}
	waitCtx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	rs, note, err := o.waitForOwner(waitCtx, log, s, clients, kind, ns, name, opts)
	if nf := (notFoundError{}); errors.As(err, &nf) {
		return err // it names the workload itself
	}
	if err != nil {
		return fmt.Errorf("%s %s/%s: %w", kind, ns, name, err)
	}

	recorder := &kube.SyncRecorder{Client: clients.Kube, Component: kube.UserAgent, Logger: log}
	att, err := core.NewAttacher(core.Config{Cluster: o.clusterName(),
		Client: clients.Kube, Metadata: clients.Metadata, Reader: core.LiveReader{Client: clients.Kube, Dynamic: clients.Dynamic, Metadata: clients.Metadata},
		Recorder: recorder, BlockOwnerDeletion: o.BlockOwnerDeletion, AllowSecrets: opts.IncludeSecrets, Logger: log,
	})
	if err != nil {
		return err
	}
	res, attachErr := att.Attach(ctx, core.Event{Namespace: ns, Name: rs.Name, UID: rs.UID, Options: opts})
	if o.DryRun == DryRunServer {
		serverDryRunOutcomes(&res)
	}
	if err := printResult(s.Out, o.Output, AttachOutput{Result: &res, DryRun: o.DryRun, Note: note}); err != nil {
		return err
	}
	if attachErr != nil {
		return attachErr
	}
	if err := listedMissing(&res); err != nil {
		return err
	}
	log.Info("done", "summary", res.Summary())
	return nil
}

// connect builds the clients and the namespace, which must exist (checkNamespace).
func (o *AttachOptions) connect(ctx context.Context) (*kube.Clients, string, error) {
	cfg, err := o.restConfig(ctx)
	if err != nil {
		return nil, "", err
	}
	if o.DryRun == DryRunServer {
		cfg = serverDryRun(cfg)
	}
	ns := o.Namespace
	if ns == "" {
		if ns, err = contextNamespace(o); err != nil {
			return nil, "", err
		}
	}
	clients, err := kube.NewClients(cfg)
	if err != nil {
		return nil, "", err
	}
	if err := reachable(ctx, clients.Kube, cfg.Host); err != nil {
		return nil, "", err
	}
	return clients, ns, checkNamespace(ctx, clients.Kube, ns)
}

// clusterName is the cluster named in the result: --cluster, else the default
// cluster's name as serve reports it.
func (o *AttachOptions) clusterName() string {
	if o.Cluster != "" {
		return o.Cluster
	}
	return dispatch.DefaultClusterName
}

// listedMissing fails when a ConfigMap or Secret named on the command line does not
// exist: both forms, one rule (the old Job exited 1 then too).
func listedMissing(res *core.Result) error {
	var missing []string
	for _, or := range res.Objects {
		if or.Outcome == core.OutcomeMissing && slices.Contains(or.From, "command-line") {
			missing = append(missing, string(or.Kind)+" "+res.Namespace+"/"+or.Name)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return notFoundError{strings.Join(missing, ", ") + " not found (named on the command line)"}
}

// serverDryRunOutcomes names what a server dry run did in the words of a client one:
// the apiserver accepted the write and stored nothing, so "attached" is "would-attach",
// as every dry run says (kubectl: "configured (server dry run)").
func serverDryRunOutcomes(res *core.Result) {
	for i := range res.Objects {
		if res.Objects[i].Outcome == core.OutcomeAttached {
			res.Objects[i].Outcome = core.OutcomeWouldAttach
		}
	}
}

// progressEvery is how often a waiting attach says on stderr what it still waits for.
var progressEvery = 5 * time.Second

// listedSettle is how long after a listed object's creation attach still waits for a
// spec that uses it (core.ListedOwnerWait.Settle).
var listedSettle = core.DefaultSettle

// waitForOwner waits for the ReplicaSet to attach to: with listed names, the one their
// pod template uses, never an older one (safety rule 10, core.ListedOwnerWait); without,
// the workload's current ReplicaSet. Every progressEvery it says on stderr what it still
// waits for.
func (o *AttachOptions) waitForOwner(ctx context.Context, log *slog.Logger, s *Streams, clients *kube.Clients, kind, ns, name string, opts core.Options) (*appsv1.ReplicaSet, string, error) {
	var listed []core.Ref
	for _, n := range opts.ConfigMaps {
		listed = append(listed, core.Ref{Kind: core.KindConfigMap, Name: n})
	}
	for _, n := range opts.Secrets {
		listed = append(listed, core.Ref{Kind: core.KindSecret, Name: n})
	}
	if kind == "ReplicaSet" {
		listed = nil // the ReplicaSet is named: only its existence is waited for
	}
	log.Info("waiting for the ReplicaSet to attach to", "kind", kind, "namespace", ns, "name", name, "listed", len(listed), "timeout", o.Timeout)
	start := time.Now()
	w := core.ListedOwnerWait{Client: clients.Kube, Dynamic: clients.Dynamic, Metadata: clients.Metadata, Interval: o.Interval,
		Settle: listedSettle, Now: clients.Clock.Now, ProgressEvery: progressEvery, Progress: func(missing string) {
			fmt.Fprintf(s.Err, "waiting for %s %s/%s (%s of %s): %s%s\n", kind, ns, name,
				time.Since(start).Round(time.Second), o.Timeout, missing, nameHints(ctx, clients, kind, ns, name, listed))
		}}
	rs, hash, err := w.ReplicaSetFor(ctx, kind, ns, name, listed)
	if errors.Is(err, core.ErrWaitCannotHelp) && apierrors.IsNotFound(err) {
		return nil, "", workloadNotFound(ctx, clients, kind, ns, name, err)
	}
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		// The final error says what the progress lines said, the closest names too.
		hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if h := nameHints(hctx, clients, kind, ns, name, listed); h != "" {
			err = fmt.Errorf("%w%s", err, h)
		}
	}
	return rs, hash, err
}

func contextNamespace(o *AttachOptions) (string, error) {
	ns, err := kube.ContextNamespace(kube.ConfigOptions{Kubeconfig: o.Kubeconfig, Context: o.Context, InCluster: o.InCluster})
	if err != nil {
		return "", err
	}
	return ns, nil
}

// AttachOutput is what `attach -o json|yaml` prints: the core's result, with the dry
// run as on every command (none, client or server) and the note on the owner chosen.
type AttachOutput struct {
	*core.Result
	DryRun string `json:"dryRun"`
	Note   string `json:"note,omitempty"`
}

func printResult(w io.Writer, format string, out AttachOutput) error {
	if ok, err := writeStructured(w, format, out); ok {
		return err
	}
	res := out.Result
	if format == OutputName {
		for _, or := range res.Objects {
			switch or.Outcome {
			case core.OutcomeAttached, core.OutcomeAlreadyAttached, core.OutcomeWouldAttach:
				fmt.Fprintf(w, "%s/%s\n", strings.ToLower(string(or.Kind)), or.Name)
			}
		}
		return nil
	}
	title := res.Summary()
	if out.DryRun != DryRunNone {
		title += " (dry run: " + out.DryRun + ", nothing stored)"
	}
	fmt.Fprintln(w, title)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, or := range res.Objects {
		line := fmt.Sprintf("  %s\t%s\t%s", or.Kind, or.Name, or.Outcome)
		if format == OutputWide {
			line += "\t" + dash(strings.Join(or.From, ",")) + "\t" + dash(strings.Join(or.Owners, ","))
		}
		if or.Reason != "" {
			line += "\t(" + or.Reason + ")"
		}
		fmt.Fprintln(tw, line)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if out.Note != "" {
		fmt.Fprintln(w, "note: "+out.Note)
	}
	for _, n := range res.Notes {
		fmt.Fprintln(w, "warning: "+n)
	}
	var notOptedIn []string
	for _, or := range res.Objects {
		if or.Outcome == core.OutcomeSkipped && strings.HasPrefix(or.Reason, "not opted in") {
			notOptedIn = append(notOptedIn, string(or.Kind)+"/"+or.Name)
		}
	}
	if len(notOptedIn) > 0 {
		fmt.Fprintf(w, "hint: the pod template references %s without the opt-in label; to opt in:\n", strings.Join(notOptedIn, ", "))
		for _, c := range inspect.NewOptInFix(res.Namespace, notOptedIn).Kubectl {
			fmt.Fprintln(w, "  "+c)
		}
		fmt.Fprintln(w, "  (configmap-attacher status -n "+res.Namespace+" shows the Kustomize and Helm forms)")
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
