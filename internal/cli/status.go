package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/configmap-attacher/configmap-attacher/internal/cluster"
	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/gc"
	"github.com/configmap-attacher/configmap-attacher/internal/kube"
)

func init() { register(newStatusCommand) }

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

// StatusReport is the status of one namespace (`status -o json` prints one per namespace).
type StatusReport struct {
	// Cluster names the cluster with --cluster, --all-contexts or --argocd-clusters.
	Cluster   string           `json:"cluster"`
	Namespace string           `json:"namespace"`
	Workloads []WorkloadStatus `json:"workloads"`
	// Unattached are revisions some object references but no referencing ReplicaSet owns.
	Unattached []GCItem `json:"unattached"`
	// Orphaned are revisions nothing references and nothing live owns.
	Orphaned []GCItem `json:"orphaned"`
	// OptIn is the fix for the workloads' references that are not opted in.
	OptIn *OptInFix `json:"optInFix,omitempty"`
	// Unprotected are attached revisions a neighbour deletes anyway, with the fix.
	Unprotected []UnprotectedItem `json:"unprotected,omitempty"`
}

// WorkloadStatus is one workload and its ReplicaSets.
type WorkloadStatus struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Via is the workload a Rollout's spec.workloadRef names ("Deployment/name").
	Via         string             `json:"via,omitempty"`
	ReplicaSets []ReplicaSetStatus `json:"replicaSets,omitempty"`
	// Uses lists the revisions a workload without ReplicaSets (StatefulSet, DaemonSet,
	// Job, CronJob, Pod) references.
	Uses []RevisionRef `json:"uses,omitempty"`
	// NotOptedIn are config objects its templates reference that have no opt-in label
	// and are not listed by name: never attached, never collected (StatusReport.OptIn).
	NotOptedIn []ConfigRef `json:"notOptedIn,omitempty"`
	// Health and Message are the workload's as `kubectl argo rollouts get` shows them
	// (a Rollout's status.phase, a Deployment's conditions).
	Health  string `json:"health,omitempty"`
	Message string `json:"message,omitempty"`
	// Dangling are config objects its templates require that do not exist: a Pod of
	// that template cannot start (CreateContainerConfigError).
	Dangling []ConfigRef `json:"dangling,omitempty"`
	// Warnings are about the workload's own settings, such as a Rollout's rollbackWindow
	// reaching past its revisionHistoryLimit (core.RollbackWindowNote).
	Warnings []string `json:"warnings,omitempty"`
}

// ReplicaSetStatus is one ReplicaSet and its revisions.
type ReplicaSetStatus struct {
	Name          string    `json:"name"`
	UID           types.UID `json:"uid"`
	Revision      string    `json:"revision,omitempty"`
	PodHash       string    `json:"podHash,omitempty"`
	Replicas      int32     `json:"replicas"`
	ReadyReplicas int32     `json:"readyReplicas"`
	Created       time.Time `json:"created"`
	// Health is Healthy, Progressing or ScaledDown; Role is stable or canary (Rollouts).
	Health string        `json:"health,omitempty"`
	Role   string        `json:"role,omitempty"`
	Owns   []RevisionRef `json:"owns"`
	// Unattached lists revisions it references but does not own (gc repairs them), and
	// objects owned by name by others that it uses without owning them (ByName: the
	// service attaches them, safety rule 11).
	Unattached []RevisionRef `json:"unattached,omitempty"`
}

// RevisionRef names a revision.
type RevisionRef struct {
	Kind   core.Kind `json:"kind"`
	Name   string    `json:"name"`
	Family string    `json:"family,omitempty"`
	// ByName is set for an object attached by name (an annotation or a command line)
	// without the opt-in label: the garbage collector deletes it with its last owner,
	// the orphan sweep never touches it.
	ByName bool `json:"byName,omitempty"`
}

// BuildStatus derives a namespace's status from its snapshot and plan (pure). others
// are the namespace's config objects outside the plan (listOthers; nil: unknown), for
// the adoption hints; secrets says whether Secrets were listed.
func BuildStatus(snap *gc.Snapshot, plan *gc.Plan, others []gc.Revision, secrets bool) StatusReport {
	rep := StatusReport{Namespace: snap.Namespace, Workloads: []WorkloadStatus{}, Unattached: []GCItem{}, Orphaned: []GCItem{}}
	items := map[types.UID]gc.Item{}
	byName := map[string]gc.Item{}
	for _, it := range plan.Items {
		items[it.UID] = it
		byName[string(it.Kind)+"/"+it.Name] = it
	}
	owners := map[types.UID][]RevisionRef{} // owner UID -> revisions it owns
	for _, r := range snap.Revisions {
		it, ok := items[r.UID]
		if !ok {
			continue
		}
		for _, or := range r.OwnerReferences {
			owners[or.UID] = append(owners[or.UID], RevisionRef{Kind: r.Kind, Name: r.Name, Family: it.Family})
		}
	}
	heldByName := map[string]bool{} // "Kind/name" of others owned by name (safety rule 11)
	for _, r := range others {
		heldByName[string(r.Kind)+"/"+r.Name] = ownedByName(r)
		for _, or := range r.OwnerReferences {
			if or.Kind == "ReplicaSet" {
				owners[or.UID] = append(owners[or.UID], RevisionRef{Kind: r.Kind, Name: r.Name, ByName: true})
			}
		}
	}
	groupOf := func(w *gc.Workload) string {
		switch w.Kind {
		case core.RolloutKind, "Deployment":
		case "ReplicaSet", "Pod":
			if c := controllerOf(w.OwnerReferences); c != nil && (c.Kind == core.RolloutKind || c.Kind == "Deployment") {
				return c.Kind + "/" + c.Name
			}
		}
		return w.Kind + "/" + w.Name
	}
	groups := map[string]*WorkloadStatus{}
	var order []string
	group := func(kind, name string) *WorkloadStatus {
		k := kind + "/" + name
		if g, ok := groups[k]; ok {
			return g
		}
		g := &WorkloadStatus{Kind: kind, Name: name}
		groups[k] = g
		order = append(order, k)
		return g
	}
	for i := range snap.Workloads {
		w := &snap.Workloads[i]
		switch w.Kind {
		case core.RolloutKind:
			g := group(w.Kind, w.Name)
			if w.WorkloadRef != nil {
				g.Via = w.WorkloadRef.Kind + "/" + w.WorkloadRef.Name
			}
		case "Deployment":
			group(w.Kind, w.Name)
		case "ReplicaSet":
			kind, name, _ := strings.Cut(groupOf(w), "/")
			rs := ReplicaSetStatus{Name: w.Name, UID: w.UID, Revision: w.Revision, PodHash: w.PodHash, Replicas: w.Replicas,
				ReadyReplicas: w.ReadyReplicas, Created: w.Created, Owns: owners[w.UID]}
			if rs.Owns == nil {
				rs.Owns = []RevisionRef{}
			}
			for _, ref := range w.Refs {
				it, ok := byName[string(ref.Kind)+"/"+ref.Name]
				if containsRev(rs.Owns, ref.Kind, ref.Name) {
					continue
				}
				if ok {
					rs.Unattached = append(rs.Unattached, RevisionRef{Kind: ref.Kind, Name: ref.Name, Family: it.Family})
				} else if heldByName[string(ref.Kind)+"/"+ref.Name] {
					// owned by others, so collected with them: the service attaches it (rule 11)
					rs.Unattached = append(rs.Unattached, RevisionRef{Kind: ref.Kind, Name: ref.Name, ByName: true})
				}
			}
			g := group(kind, name)
			g.ReplicaSets = append(g.ReplicaSets, rs)
		case "ControllerRevision":
			continue // template history: it keeps revisions, it is not a workload to show
		case "Pod":
			if c := controllerOf(w.OwnerReferences); c != nil && c.Kind == "ReplicaSet" {
				continue // folded under its ReplicaSet (ready/desired)
			}
			fallthrough
		default:
			var uses []RevisionRef
			for _, ref := range w.Refs {
				if it, ok := byName[string(ref.Kind)+"/"+ref.Name]; ok {
					uses = append(uses, RevisionRef{Kind: ref.Kind, Name: ref.Name, Family: it.Family})
				}
			}
			if len(uses) > 0 || len(owners[w.UID]) > 0 {
				g := group(w.Kind, w.Name)
				g.Uses = append(uses, owners[w.UID]...)
			}
		}
	}
	adoption(&rep, snap, others, byName, secrets, func(w *gc.Workload) *WorkloadStatus {
		if c := controllerOf(w.OwnerReferences); w.Kind == "Pod" && c != nil && c.Kind == "ReplicaSet" {
			for i := range snap.Workloads { // the ReplicaSet's group
				if rs := &snap.Workloads[i]; rs.Kind == "ReplicaSet" && rs.UID == c.UID {
					w = rs
				}
			}
		}
		kind, name, _ := strings.Cut(groupOf(w), "/")
		return group(kind, name)
	})
	sort.Strings(order)
	for _, k := range order {
		g := groups[k]
		sort.Slice(g.ReplicaSets, func(i, j int) bool {
			a, b := g.ReplicaSets[i], g.ReplicaSets[j]
			ra, ea := strconv.Atoi(a.Revision)
			rb, eb := strconv.Atoi(b.Revision)
			if ea == nil && eb == nil && ra != rb {
				return ra > rb
			}
			if !a.Created.Equal(b.Created) {
				return a.Created.After(b.Created)
			}
			return a.Name < b.Name
		})
		rep.Workloads = append(rep.Workloads, *g)
	}
	rep.Unprotected = unprotected(snap.Revisions, others)
	for _, it := range plan.Items {
		switch {
		case it.Decision == gc.Repair || (len(it.ReferencedBy) > 0 && len(it.Owners) == 0):
			rep.Unattached = append(rep.Unattached, gcItem(it, ""))
		case len(it.ReferencedBy) == 0 && len(it.Owners) == 0:
			rep.Orphaned = append(rep.Orphaned, gcItem(it, ""))
		}
	}
	return rep
}

func controllerOf(refs []metav1.OwnerReference) *metav1.OwnerReference {
	for i := range refs {
		if refs[i].Controller != nil && *refs[i].Controller {
			return &refs[i]
		}
	}
	return nil
}

func containsRev(rs []RevisionRef, kind core.Kind, name string) bool {
	for _, r := range rs {
		if r.Kind == kind && r.Name == name {
			return true
		}
	}
	return false
}

// RenderStatus writes rep as a tree (like `kubectl argo rollouts get rollout`). now is
// the clock ages are computed against.
func RenderStatus(w io.Writer, rep StatusReport, now time.Time) { renderStatus(w, rep, now, false) }

func renderStatus(w io.Writer, rep StatusReport, now time.Time, pal palette) {
	age := func(t time.Time) string { return duration.ShortHumanDuration(now.Sub(t)) }
	fmt.Fprintf(w, "Namespace: %s\n", rep.Namespace)
	if len(rep.Workloads) == 0 {
		fmt.Fprintln(w, "  (no workloads using or owning revisions)")
	}
	for _, g := range rep.Workloads {
		title := g.Kind + " " + g.Name
		if g.Via != "" {
			title += " (template from " + g.Via + ")"
		}
		if g.Health != "" {
			title += "  " + healthMark(pal, g.Health)
		}
		if g.Message != "" {
			title += "  (" + g.Message + ")"
		}
		fmt.Fprintln(w, title)
		type line struct {
			text     string
			children []string
		}
		var lines []line
		for _, rs := range g.ReplicaSets {
			t := fmt.Sprintf("ReplicaSet %s", rs.Name)
			if rs.Health != "" {
				t += "  " + healthMark(pal, rs.Health)
			}
			if rs.Role != "" {
				t += "  " + rs.Role
			}
			var meta []string
			if rs.Revision != "" {
				meta = append(meta, "revision:"+rs.Revision)
			}
			if rs.PodHash != "" {
				meta = append(meta, "hash:"+rs.PodHash)
			}
			meta = append(meta, fmt.Sprintf("ready:%d/%d", rs.ReadyReplicas, rs.Replicas), "age:"+age(rs.Created))
			t += "  " + strings.Join(meta, "  ")
			var ch []string
			for _, r := range rs.Owns {
				if r.ByName {
					ch = append(ch, fmt.Sprintf("%s %s  owned, by name (no opt-in label: gc never collects it)", r.Kind, r.Name))
					continue
				}
				ch = append(ch, fmt.Sprintf("%s %s  owned  family:%s", r.Kind, r.Name, r.Family))
			}
			for _, r := range rs.Unattached {
				if r.ByName {
					ch = append(ch, fmt.Sprintf("%s %s  used, NOT attached, owned by name by others: the garbage collector deletes it with them", r.Kind, r.Name))
					continue
				}
				ch = append(ch, fmt.Sprintf("%s %s  used, NOT attached  family:%s", r.Kind, r.Name, r.Family))
			}
			if len(ch) == 0 {
				ch = append(ch, "(no revisions)")
			}
			lines = append(lines, line{t, ch})
		}
		for _, r := range g.Uses {
			lines = append(lines, line{text: fmt.Sprintf("%s %s  used  family:%s", r.Kind, r.Name, r.Family)})
		}
		for _, r := range g.NotOptedIn {
			lines = append(lines, line{text: fmt.Sprintf("%s %s  referenced but not opted in (by %s): never attached; see \"To opt in\"",
				r.Kind, r.Name, strings.Join(r.UsedBy, ", "))})
		}
		for _, n := range g.Warnings {
			lines = append(lines, line{text: pal.paint(colorRed, "WARNING") + " " + n})
		}
		for _, r := range g.Dangling {
			lines = append(lines, line{text: fmt.Sprintf("%s %s  %s: referenced by %s but does not exist; a new Pod cannot start",
				r.Kind, r.Name, pal.paint(colorRed, "MISSING"), strings.Join(r.UsedBy, ", "))})
		}
		for i, l := range lines {
			branch, indent := "├── ", "│   "
			if i == len(lines)-1 {
				branch, indent = "└── ", "    "
			}
			fmt.Fprintln(w, branch+l.text)
			for j, c := range l.children {
				b := "├── "
				if j == len(l.children)-1 {
					b = "└── "
				}
				fmt.Fprintln(w, indent+b+c)
			}
		}
	}
	section := func(title string, items []GCItem, detail func(GCItem) string) {
		fmt.Fprintf(w, "%s: %d\n", title, len(items))
		for i, it := range items {
			b := "├── "
			if i == len(items)-1 {
				b = "└── "
			}
			fmt.Fprintf(w, "%s%s %s  family:%s  age:%s  %s\n", b, it.Kind, it.Name, it.Family, age(it.Created), detail(it))
		}
	}
	section("Unattached revisions (used, not owned by a ReplicaSet using them)", rep.Unattached, func(it GCItem) string {
		return "used by " + strings.Join(it.ReferencedBy, ", ") + "; gc: " + string(it.Decision)
	})
	section("Orphaned revisions (unused, no live owner)", rep.Orphaned, func(it GCItem) string {
		return "gc: " + string(it.Decision) + " (" + it.Reason + ")"
	})
	renderUnprotected(w, rep.Unprotected)
	if rep.OptIn != nil {
		renderOptIn(w, rep.OptIn)
	}
}

// renderOptIn prints the exact fix for references that are not opted in.
func renderOptIn(w io.Writer, fix *OptInFix) {
	fmt.Fprintln(w, "To opt in what the workloads above reference but do not opt in (then attach or serve attaches it):")
	for _, c := range fix.Kubectl {
		fmt.Fprintln(w, "  "+c)
	}
	fmt.Fprintln(w, "  or in Kustomize, beside the configMapGenerator:")
	fmt.Fprintln(w, "    "+strings.ReplaceAll(fix.Kustomize, "\n", "\n    "))
	fmt.Fprintln(w, "  or in a Helm chart's ConfigMap template:")
	fmt.Fprintln(w, "    "+strings.ReplaceAll(fix.Helm, "\n", "\n    "))
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
	multi := len(targets) > 1 || targets[0].name != ""
	sweepers := make([]*gc.Sweeper, len(targets))
	for i, t := range targets {
		if sweepers[i], err = gc.NewSweeper(gc.Config{Cluster: t.name, DryRun: true, Namespaces: t.nss, Selector: sel,
			Source:  gc.LiveSource{Client: t.clients.Kube, Dynamic: t.clients.Dynamic, Metadata: t.clients.Metadata, IncludeSecrets: o.IncludeSecrets},
			Options: gc.Options{MinAge: o.MinAge, Keep: o.Keep}, Clock: t.clients.Clock.Now}); err != nil {
			return err
		}
	}
	apps := make([]*kube.Applications, len(targets))
	for i, t := range targets {
		apps[i] = &kube.Applications{Dynamic: t.clients.Dynamic}
	}
	// one builds the reports of one cluster.
	one := func(ctx context.Context, i int) ([]StatusReport, error) {
		t := targets[i]
		list := t.nss
		if list == nil {
			var err error
			if list, err = (gc.LiveSource{Metadata: t.clients.Metadata, IncludeSecrets: o.IncludeSecrets}).Namespaces(ctx); err != nil {
				return nil, err
			}
		}
		reps := []StatusReport{}
		for _, ns := range list {
			plan, snap, err := sweepers[i].Plan(ctx, ns)
			if err != nil {
				return nil, err
			}
			rep := BuildStatus(snap, plan, listOthers(ctx, t.clients.Metadata, ns, o.IncludeSecrets, plan), o.IncludeSecrets)
			addHealth(ctx, t.clients, ns, &rep)
			addAppUnprotected(ctx, apps[i], &rep, snap.Revisions)
			rep.Cluster = clusterOrDefault(t.name)
			reps = append(reps, rep)
		}
		return reps, nil
	}
	var missing []string // the MISSING config of the last render, for --exit-code
	render := func() ([]byte, error) {
		perCluster := make([][]StatusReport, len(targets))
		idx := make([]int, len(targets))
		for i := range idx {
			idx[i] = i
		}
		errs := make([]error, len(targets))
		failed := cluster.Parallel(ctx, idx, o.Parallel, func(i int) string { return targets[i].name }, func(ctx context.Context, i int) error {
			perCluster[i], errs[i] = one(ctx, i)
			return errs[i]
		})
		if failed != nil && !multi {
			return nil, errs[0] // the single cluster's own error, without a cluster prefix
		}
		missing = missingConfig(perCluster, multi)
		var buf bytes.Buffer
		reps := []StatusReport{}
		now := time.Now()
		pal := palette(useColor(s.Out))
		rendered := 0
		for i, t := range targets {
			if multi && !structured(o.Output) {
				if rendered > 0 {
					buf.WriteString("\n")
				}
				rendered = 0
				fmt.Fprintf(&buf, "Cluster: %s\n", t.name)
			}
			for _, rep := range perCluster[i] {
				if structured(o.Output) {
					reps = append(reps, rep)
					continue
				}
				if rendered++; rendered > 1 {
					buf.WriteString("\n") // namespaces apart
				}
				renderStatus(&buf, rep, now, pal)
			}
			if len(perCluster[i]) == 0 && !structured(o.Output) && (multi || failed == nil) {
				buf.WriteString("no opted-in revisions found in any namespace; status -n NAMESPACE shows what its workloads reference and how to opt it in\n")
			}
		}
		if _, err := writeStructured(&buf, o.Output, reps); err != nil {
			return nil, err
		}
		return buf.Bytes(), failed
	}
	out, failed := render()
	if out == nil {
		return failed
	}
	if _, err := s.Out.Write(out); err != nil {
		return err
	}
	if !o.Watch {
		if o.ExitCode {
			return exitCodeResult(failed, missing)
		}
		return failed
	}
	if failed != nil {
		fmt.Fprintln(s.Err, "status: "+core.OneLine(failed.Error())+" (retrying)")
	}
	tty := isTerminal(s.Out)
	t := time.NewTicker(o.Interval)
	defer t.Stop()
	last := out
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		out, err := render()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			fmt.Fprintln(s.Err, "status: "+core.OneLine(err.Error())+" (retrying)")
			if out == nil {
				continue
			}
		}
		if !structured(o.Output) && bytes.Equal(stripAges(out), stripAges(last)) {
			continue
		}
		if structured(o.Output) && bytes.Equal(stripJSONAges(out), stripJSONAges(last)) {
			continue
		}
		last = out
		switch {
		case tty:
			fmt.Fprint(s.Out, "\033[H\033[2J")
		case o.Output == OutputJSON:
			// a stream of JSON documents, as kubectl get --watch -o json prints
		case o.Output == OutputYAML:
			fmt.Fprintln(s.Out, "---")
		default:
			fmt.Fprintf(s.Out, "--- %s\n", time.Now().UTC().Format(time.RFC3339))
		}
		if _, err := s.Out.Write(out); err != nil {
			return err
		}
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
