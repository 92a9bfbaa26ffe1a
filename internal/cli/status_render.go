package cli

import (
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/configmap-attacher/configmap-attacher/internal/inspect"
)

// RenderStatus writes rep as a tree (like `kubectl argo rollouts get rollout`). now is
// the clock ages are computed against.
func RenderStatus(w io.Writer, rep inspect.Report, now time.Time) { renderStatus(w, rep, now, false) }

func renderStatus(w io.Writer, rep inspect.Report, now time.Time, pal palette) {
	age := func(t time.Time) string { return duration.ShortHumanDuration(now.Sub(t)) }
	fmt.Fprintf(w, "Namespace: %s\n", rep.Namespace)
	if len(rep.Workloads) == 0 {
		fmt.Fprintln(w, "  (no workloads using or owning revisions)")
	}
	for _, g := range rep.Workloads {
		fmt.Fprintln(w, workloadTitle(g, pal))
		printTree(w, workloadLines(g, age, pal))
	}
	renderSection(w, "Unattached revisions (used, not owned by a ReplicaSet using them)", rep.Unattached, age, func(it inspect.PlanItem) string {
		return "used by " + strings.Join(it.ReferencedBy, ", ") + "; gc: " + string(it.Decision)
	})
	renderSection(w, "Orphaned revisions (unused, no live owner)", rep.Orphaned, age, func(it inspect.PlanItem) string {
		return "gc: " + string(it.Decision) + " (" + it.Reason + ")"
	})
	renderUnprotected(w, rep.Unprotected)
	if rep.OptIn != nil {
		renderOptIn(w, rep.OptIn)
	}
}

// treeLine is a line under a workload, with the lines under it.
type treeLine struct {
	text     string
	children []string
}

// workloadTitle is a workload's line: kind, name, where its template comes from, health.
func workloadTitle(g inspect.WorkloadStatus, pal palette) string {
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
	return title
}

// workloadLines are the lines under a workload: its ReplicaSets with their revisions,
// the revisions it uses, the references not opted in, its warnings and what is MISSING.
func workloadLines(g inspect.WorkloadStatus, age func(time.Time) string, pal palette) []treeLine {
	var lines []treeLine
	for _, rs := range g.ReplicaSets {
		lines = append(lines, replicaSetLine(rs, age, pal))
	}
	for _, r := range g.Uses {
		lines = append(lines, treeLine{text: fmt.Sprintf("%s %s  used  family:%s", r.Kind, r.Name, r.Family)})
	}
	for _, r := range g.NotOptedIn {
		lines = append(lines, treeLine{text: fmt.Sprintf("%s %s  referenced but not opted in (by %s): never attached; see \"To opt in\"",
			r.Kind, r.Name, strings.Join(r.UsedBy, ", "))})
	}
	for _, n := range g.Warnings {
		lines = append(lines, treeLine{text: pal.paint(colorRed, "WARNING") + " " + n})
	}
	for _, r := range g.Dangling {
		lines = append(lines, treeLine{text: fmt.Sprintf("%s %s  %s: referenced by %s but does not exist; a new Pod cannot start",
			r.Kind, r.Name, pal.paint(colorRed, "MISSING"), strings.Join(r.UsedBy, ", "))})
	}
	return lines
}

// replicaSetLine is a ReplicaSet's line (health, role, revision, hash, ready, age) with
// the revisions it owns and those it uses unattached under it.
func replicaSetLine(rs inspect.ReplicaSetStatus, age func(time.Time) string, pal palette) treeLine {
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
	return treeLine{t, ch}
}

// printTree prints lines as the branches of a tree, each with its children.
func printTree(w io.Writer, lines []treeLine) {
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

// renderSection prints a titled count of plan items, each with its detail.
func renderSection(w io.Writer, title string, items []inspect.PlanItem, age func(time.Time) string, detail func(inspect.PlanItem) string) {
	fmt.Fprintf(w, "%s: %d\n", title, len(items))
	for i, it := range items {
		b := "├── "
		if i == len(items)-1 {
			b = "└── "
		}
		fmt.Fprintf(w, "%s%s %s  family:%s  age:%s  %s\n", b, it.Kind, it.Name, it.Family, age(it.Created), detail(it))
	}
}

// renderOptIn prints the exact fix for references that are not opted in.
func renderOptIn(w io.Writer, fix *inspect.OptInFix) {
	fmt.Fprintln(w, "To opt in what the workloads above reference but do not opt in (then attach or serve attaches it):")
	for _, c := range fix.Kubectl {
		fmt.Fprintln(w, "  "+c)
	}
	fmt.Fprintln(w, "  or in Kustomize, beside the configMapGenerator:")
	fmt.Fprintln(w, "    "+strings.ReplaceAll(fix.Kustomize, "\n", "\n    "))
	fmt.Fprintln(w, "  or in a Helm chart's ConfigMap template (the annotation when installed with helm upgrade, not through Argo CD):")
	fmt.Fprintln(w, "    "+strings.ReplaceAll(fix.Helm, "\n", "\n    "))
}

// renderUnprotected prints the unprotected revisions, each with its fix; nothing when
// there are none.
func renderUnprotected(w io.Writer, items []inspect.UnprotectedItem) {
	if len(items) == 0 {
		return
	}
	fmt.Fprintf(w, "Not protected by their owners (a neighbour deletes them anyway): %d\n", len(items))
	for i, it := range items {
		b, indent := "├── ", "│   "
		if i == len(items)-1 {
			b, indent = "└── ", "    "
		}
		fmt.Fprintf(w, "%s%s %s  %s, owned by ReplicaSet %s: %s\n", b, it.Kind, it.Name, it.Reason, strings.Join(it.OwnedBy, ", "), it.Message)
		fmt.Fprintf(w, "%s    fix: %s\n", indent, it.Fix)
	}
}

// healthMark is the symbol and colour `kubectl argo rollouts get` uses for a health.
func healthMark(pal palette, h string) string {
	switch h {
	case inspect.HealthHealthy:
		return pal.paint(colorGreen, "✔ "+h)
	case inspect.HealthProgressing:
		return pal.paint(colorYellow, "◌ "+h)
	case inspect.HealthPaused:
		return pal.paint(colorYellow, "॥ "+h)
	case inspect.HealthDegraded:
		return pal.paint(colorRed, "✖ "+h)
	case inspect.HealthScaledDown:
		return "• " + h
	case "":
		return ""
	}
	return h
}
