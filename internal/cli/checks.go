package cli

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/kube"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
)

// notFoundError marks a named object that does not exist (exit 1, at once, not after a
// wait): a namespace given with -n/-namespace, or a name listed with --configmaps.
type notFoundError struct{ msg string }

func (e notFoundError) Error() string { return e.msg }

// checkNamespace fails at once when namespace ns does not exist, naming the closest
// existing one. Whoever may not read namespaces (a Sync-hook Job's service account often
// may not) is not checked: the command then waits as before, with progress.
func checkNamespace(ctx context.Context, kc kubernetes.Interface, ns string) error {
	_, err := kc.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err == nil || !apierrors.IsNotFound(err) {
		return nil
	}
	msg := fmt.Sprintf("namespace %q not found", ns)
	if list, lerr := kc.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); lerr == nil {
		names := make([]string, 0, len(list.Items))
		for _, n := range list.Items {
			names = append(names, n.Name)
		}
		if s := suggest(ns, names); s != "" {
			msg += fmt.Sprintf("; did you mean %q?", s)
		}
	}
	return notFoundError{msg}
}

// suggest returns the candidate closest to word within a small edit distance (as
// cobra suggests subcommands), or "".
func suggest(word string, candidates []string) string {
	best, bestD := "", 3
	if len(word) < 4 {
		bestD = 2
	}
	sort.Strings(candidates)
	for _, c := range candidates {
		if c == word {
			continue
		}
		if d := editDistance(strings.ToLower(word), strings.ToLower(c)); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// nameHints is what a waiting attach adds to its progress line when a name it waits for
// does not exist but a close one does: "; did you mean ...?" for the workload and for each
// name listed on the command line. Whoever may not list them gets no hint.
func nameHints(ctx context.Context, c *kube.Clients, kind, ns, name string, listed []core.Ref) string {
	var hints []string
	if gvr, ok := workloadGVR(kind); ok {
		if h := hintFor(ctx, c, gvr, ns, name); h != "" {
			hints = append(hints, fmt.Sprintf("%s %q", kind, h))
		}
	}
	for _, r := range listed {
		if h := hintFor(ctx, c, r.Kind.GVR(), ns, r.Name); h != "" {
			hints = append(hints, fmt.Sprintf("%s %q", r.Kind, h))
		}
	}
	if len(hints) == 0 {
		return ""
	}
	return "; did you mean " + strings.Join(hints, ", ") + "?"
}

// hintFor suggests the closest existing name of resource gvr in ns when name itself does
// not exist (metadata only), or "".
func hintFor(ctx context.Context, c *kube.Clients, gvr schema.GroupVersionResource, ns, name string) string {
	res := c.Metadata.Resource(gvr).Namespace(ns)
	if _, err := res.Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		return ""
	}
	list, err := res.List(ctx, metav1.ListOptions{})
	if err != nil {
		return ""
	}
	names := make([]string, 0, len(list.Items))
	for _, it := range list.Items {
		names = append(names, it.Name)
	}
	return suggest(name, names)
}

// workloadGVR is the resource of a workload kind attach waits for.
func workloadGVR(kind string) (schema.GroupVersionResource, bool) {
	switch kind {
	case "Rollout":
		return core.RolloutGVR, true
	case "Deployment":
		return appsv1.SchemeGroupVersion.WithResource("deployments"), true
	case "ReplicaSet":
		return appsv1.SchemeGroupVersion.WithResource("replicasets"), true
	}
	return schema.GroupVersionResource{}, false
}
