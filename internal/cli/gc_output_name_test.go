package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/gc"
	"github.com/configmap-attacher/configmap-attacher/internal/inspect"
)

// `gc -o name` prints only the revisions deleted (or, in a dry run, that would be):
// `gc -o name | xargs kubectl delete` must never name a kept, repaired or live revision.
func TestGCOutputNamePrintsOnlyTheDeleted(t *testing.T) {
	item := func(name string, d gc.Decision, o gc.Outcome) inspect.PlanItem {
		return inspect.PlanItem{Kind: core.KindConfigMap, Name: name, Decision: d, Outcome: o}
	}
	for _, tc := range []struct {
		name   string
		dryRun string
		items  []inspect.PlanItem
		want   string
	}{
		{"client dry run names the would-delete only", DryRunClient, []inspect.PlanItem{
			item("web-1", gc.Delete, gc.OutcomeWouldDelete), item("web-2", gc.Delete, gc.OutcomeWouldDelete),
			item("web-3", gc.Keep, gc.OutcomeKept), item("web-4", gc.Keep, gc.OutcomeKept),
			item("web-5", gc.Repair, gc.OutcomeWouldRepair)},
			"configmap/web-1\nconfigmap/web-2\n"},
		{"server dry run names the would-delete only", DryRunServer, []inspect.PlanItem{
			item("web-1", gc.Delete, gc.OutcomeWouldDelete), item("web-2", gc.Keep, gc.OutcomeKept)},
			"configmap/web-1\n"},
		{"real run names the deleted only", DryRunNone, []inspect.PlanItem{
			item("web-1", gc.Delete, gc.OutcomeDeleted), item("web-2", gc.Delete, gc.OutcomeChanged),
			item("web-3", gc.Delete, gc.OutcomeGone), item("web-4", gc.Delete, gc.OutcomeError),
			item("web-5", gc.Repair, gc.OutcomeRepaired), item("web-6", gc.Keep, gc.OutcomeKept)},
			"configmap/web-1\n"},
		{"nothing to delete prints nothing", DryRunClient, []inspect.PlanItem{item("web-1", gc.Keep, gc.OutcomeKept)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := &GCOutput{DryRun: tc.dryRun, Namespaces: []GCNamespace{{Namespace: "ns", DryRun: tc.dryRun, Results: tc.items}}}
			var buf bytes.Buffer
			if err := printGC(&buf, OutputName, out, time.Now()); err != nil {
				t.Fatal(err)
			}
			if got := buf.String(); got != tc.want {
				t.Errorf("gc -o name printed %q, want %q", got, tc.want)
			}
			if strings.Contains(buf.String(), "web-6") {
				t.Error("a kept revision was named")
			}
		})
	}
}
