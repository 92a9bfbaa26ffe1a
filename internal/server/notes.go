package server

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
)

// maxOptInNotes bounds the objects remembered as already noted; beyond it the memory
// starts again (a note may then repeat, never grow without bound).
const maxOptInNotes = 10000

// optInNotes says once per object, not per event, that a config object a ReplicaSet
// references is skipped for want of the opt-in label, with the fix. It reads the
// core's per-object results from every answer (dispatch.Config.Observe).
type optInNotes struct {
	log  *slog.Logger
	mu   sync.Mutex
	seen map[string]bool
}

func newOptInNotes(log *slog.Logger) *optInNotes {
	return &optInNotes{log: log, seen: map[string]bool{}}
}

func (n *optInNotes) observe(a dispatch.Answer) {
	r := &a.Response
	for _, o := range r.Objects {
		if o.Outcome != core.OutcomeSkipped || !strings.HasPrefix(o.Reason, "not opted in") || !n.first(r.Cluster, r.Namespace, o) {
			continue
		}
		n.log.Info("referenced but not opted in: never attached or collected until labelled (said once per object)",
			"cluster", r.Cluster, "namespace", r.Namespace, "kind", o.Kind, "name", o.Name, "replicaSet", r.ReplicaSet,
			"fix", fmt.Sprintf("kubectl label %s -n %s %s %s=true", strings.ToLower(string(o.Kind)), r.Namespace, o.Name, core.LabelRevision))
	}
}

func (n *optInNotes) first(cluster, ns string, o core.ObjectResult) bool {
	key := cluster + "/" + ns + "/" + string(o.Kind) + "/" + o.Name
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.seen[key] {
		return false
	}
	if len(n.seen) >= maxOptInNotes {
		n.seen = map[string]bool{}
	}
	n.seen[key] = true
	return true
}
