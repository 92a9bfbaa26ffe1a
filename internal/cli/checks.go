package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/kube"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
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

// firstContact bounds how long a one-shot command that waits (attach, the old Job's
// form) retries an apiserver that gives no answer at all before it fails: long enough
// for a sidecar proxy that starts after the Job's container, far below --timeout.
var firstContact = 10 * time.Second

// reachable fails when the apiserver at host gives no answer (connection refused, no
// route, DNS, TLS) within firstContact: waiting for a ReplicaSet cannot help then. Any
// answer, even a refusal (401, 403, 5xx), counts: the calls that follow report it.
func reachable(ctx context.Context, kc kubernetes.Interface, host string) error {
	cctx, cancel := context.WithTimeout(ctx, firstContact)
	defer cancel()
	var last error
	err := wait.PollUntilContextCancel(cctx, time.Second, true, func(cctx context.Context) (bool, error) {
		_, err := kc.Discovery().RESTClient().Get().AbsPath("/version").Do(cctx).Raw()
		var status apierrors.APIStatus
		switch {
		case err == nil || errors.As(err, &status):
			return true, nil
		case last != nil && cctx.Err() != nil, strings.Contains(err.Error(), "would exceed context deadline"):
			return false, nil // cut short by firstContact's deadline: keep the last real reason
		}
		last = err
		if networkError(err) && ctx.Err() == nil {
			return false, nil // retried until firstContact
		}
		return false, err
	})
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case last == nil:
		last = err
	}
	return fmt.Errorf("cannot reach the apiserver %s: %w", host, last)
}

// networkError reports whether err, under the url.Error every request failure comes
// in, is a network error (refused, unreachable, DNS, a timeout), which a moment may fix,
// rather than a TLS or configuration error, which it will not.
func networkError(err error) bool {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded)
}

// workloadNotFound is the error of a one-shot command whose workload does not exist
// (err, a NotFound): named, with the closest existing name, at once.
func workloadNotFound(ctx context.Context, c *kube.Clients, kind, ns, name string, err error) error {
	msg := fmt.Sprintf("%s %s/%s not found", kind, ns, name)
	if strings.Contains(err.Error(), "could not find the requested resource") {
		gvr, _ := workloadGVR(kind)
		return notFoundError{fmt.Sprintf("%s: the apiserver does not serve %s (is its CRD installed?)", msg, gvr.GroupResource())}
	}
	return notFoundError{msg + nameHints(ctx, c, kind, ns, name, nil)}
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
