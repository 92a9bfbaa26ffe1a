package cli

import (
	"context"
	"fmt"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
