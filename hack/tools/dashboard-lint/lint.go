package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
)

func init() { plugins.RegisterDefaultPlugins() }

// isNil: the SDK returns an empty cog.BuildErrors as a non-nil error when all is well.
func isNil(err error) bool {
	var be cog.BuildErrors
	if errors.As(err, &be) {
		return len(be) == 0
	}
	return err == nil
}

// Finding is one rule broken: "rule: where: what".
type Finding struct{ Rule, Where, What string }

func (f Finding) String() string { return f.Rule + ": " + f.Where + ": " + f.What }

type linter struct {
	known    map[string]bool
	findings []Finding
}

func (l *linter) add(rule, where, format string, args ...any) {
	l.findings = append(l.findings, Finding{rule, where, fmt.Sprintf(format, args...)})
}

// Lint returns what is wrong with the dashboard JSON raw.
func Lint(raw []byte, known map[string]bool) []Finding {
	l := &linter{known: known}
	var d dashboard.Dashboard
	if err := d.UnmarshalJSONStrict(raw); !isNil(err) {
		l.add("schema", "dashboard", "%v", err)
		return l.findings
	}
	if err := d.Validate(); !isNil(err) {
		l.add("schema", "dashboard", "%v", err)
	}
	l.templates(d.Templating.List)
	panels, rows, err := decodePanels(raw)
	if err != nil {
		l.add("schema", "panels", "%v", err)
		return l.findings
	}
	ids := map[uint32]string{}
	for _, r := range rows {
		title := ""
		if r.Title != nil {
			title = *r.Title
		}
		l.id(ids, &r.Id, "row "+title)
	}
	for _, p := range panels {
		l.panel(ids, p)
	}
	return l.findings
}

// panel is a decoded panel and its Prometheus queries.
type panel struct {
	*dashboard.Panel
	queries []*prometheus.Dataquery
}

// decodePanels decodes the dashboard's panels, those of rows included, and their queries.
// Dashboard's own decoding leaves them empty: in SDK v0.0.22 the strict decoders return an
// empty cog.BuildErrors as a non-nil error, and the panel (or the query) is then dropped.
func decodePanels(raw []byte) ([]panel, []*dashboard.RowPanel, error) {
	var d struct {
		Panels []json.RawMessage `json:"panels"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, nil, err
	}
	var panels []panel
	var rows []*dashboard.RowPanel
	for _, pr := range d.Panels {
		var head struct {
			Type   string            `json:"type"`
			Panels []json.RawMessage `json:"panels"`
		}
		if err := json.Unmarshal(pr, &head); err != nil {
			return nil, nil, err
		}
		all := []json.RawMessage{pr}
		if head.Type == "row" {
			var r dashboard.RowPanel
			if err := r.UnmarshalJSONStrict(pr); !isNil(err) {
				return nil, nil, err
			}
			rows = append(rows, &r)
			all = head.Panels
		}
		for _, raw := range all {
			p := panel{Panel: &dashboard.Panel{}}
			if err := p.UnmarshalJSONStrict(raw); !isNil(err) {
				return nil, nil, err
			}
			var t struct {
				Targets []json.RawMessage `json:"targets"`
			}
			if err := json.Unmarshal(raw, &t); err != nil {
				return nil, nil, err
			}
			for _, tr := range t.Targets {
				q := &prometheus.Dataquery{}
				if err := q.UnmarshalJSONStrict(tr); !isNil(err) {
					return nil, nil, err
				}
				p.queries = append(p.queries, q)
			}
			panels = append(panels, p)
		}
	}
	return panels, rows, nil
}

// templates: a Prometheus datasource variable named datasource, and job and instance
// query variables on it (template-datasource-rule, template-job-rule, template-instance-rule).
func (l *linter) templates(vars []dashboard.VariableModel) {
	by := map[string]dashboard.VariableModel{}
	for _, v := range vars {
		by[v.Name] = v
	}
	ds, ok := by["datasource"]
	if !ok || ds.Type != dashboard.VariableTypeDatasource || ds.Query == nil || ds.Query.String == nil || *ds.Query.String != "prometheus" {
		l.add("template-datasource-rule", "templating", "want a variable datasource of type datasource, query prometheus")
	}
	for _, name := range []string{"job", "instance"} {
		v, ok := by[name]
		if !ok || v.Type != dashboard.VariableTypeQuery {
			l.add("template-"+name+"-rule", "templating", "want a query variable %s", name)
			continue
		}
		if !isDatasourceVar(v.Datasource) {
			l.add("template-"+name+"-rule", "variable "+name, "datasource must be ${datasource}")
		}
		if v.Multi == nil || !*v.Multi || v.IncludeAll == nil || !*v.IncludeAll {
			l.add("template-"+name+"-rule", "variable "+name, "must be multi-value with All")
		}
	}
}

func isDatasourceVar(ref *common.DataSourceRef) bool {
	return ref != nil && ref.Uid != nil && (*ref.Uid == "${datasource}" || *ref.Uid == "$datasource")
}

func (l *linter) id(ids map[uint32]string, id *uint32, where string) {
	if id == nil {
		l.add("panel-id-rule", where, "no id")
		return
	}
	if other, dup := ids[*id]; dup {
		l.add("panel-id-rule", where, "id %d is also %s's", *id, other)
	}
	ids[*id] = where
}

// unitPanels are the panel types whose values need a unit (panel-units-rule).
var unitPanels = map[string]bool{"timeseries": true, "stat": true, "gauge": true, "bargauge": true}

func (l *linter) panel(ids map[uint32]string, p panel) {
	title := ""
	if p.Title != nil {
		title = *p.Title
	}
	where := fmt.Sprintf("panel %q", title)
	l.id(ids, p.Id, where)
	if title == "" || p.Description == nil || strings.TrimSpace(*p.Description) == "" {
		l.add("panel-title-description-rule", where, "a panel needs a title and a description")
	}
	if unitPanels[p.Type] && (p.FieldConfig == nil || p.FieldConfig.Defaults.Unit == nil || *p.FieldConfig.Defaults.Unit == "") {
		l.add("panel-units-rule", where, "no unit (fieldConfig.defaults.unit)")
	}
	if p.GridPos == nil {
		l.add("panel-gridpos-rule", where, "no gridPos")
	}
	if !isDatasourceVar(p.Datasource) {
		l.add("panel-datasource-rule", where, "datasource must be ${datasource}")
	}
	if len(p.queries) == 0 {
		l.add("panel-targets-rule", where, "no queries")
	}
	for i, q := range p.queries {
		tw := fmt.Sprintf("%s target %d", where, i)
		if q.Datasource != nil && !isDatasourceVar(q.Datasource) {
			l.add("target-datasource-rule", tw, "datasource must be ${datasource}")
		}
		l.query(tw, q.Expr)
	}
}

// rateInterval stands for $__rate_interval while parsing: a range of exactly it is one.
const rateInterval = 4*time.Minute + 33*time.Second

var grafanaVars = strings.NewReplacer("$__rate_interval", model.Duration(rateInterval).String(),
	"$__interval", "1m", "$__range", "1h")

// counterFuncs are the functions a counter (or histogram bucket, count, sum) must be read through.
var counterFuncs = map[string]bool{"rate": true, "irate": true, "increase": true}

var counterName = regexp.MustCompile(`(_total|_bucket|_count|_sum)$`)

// query: the PromQL parses (target-promql-rule); every selector has job=~"$job" and
// instance=~"$instance" (target-job-rule, target-instance-rule) and names a known metric;
// ranges are $__rate_interval (target-rate-interval-rule); counters are rated
// (target-counter-agg-rule).
func (l *linter) query(where, expr string) {
	e, err := parser.NewParser(parser.Options{}).ParseExpr(grafanaVars.Replace(expr))
	if err != nil {
		l.add("target-promql-rule", where, "%v: %s", err, expr)
		return
	}
	parser.Inspect(e, func(n parser.Node, path []parser.Node) error {
		switch n := n.(type) {
		case *parser.MatrixSelector:
			if n.Range != rateInterval {
				l.add("target-rate-interval-rule", where, "range [%s]: use [$__rate_interval]", model.Duration(n.Range))
			}
		case *parser.VectorSelector:
			l.selector(where, n, path)
		}
		return nil
	})
}

func (l *linter) selector(where string, v *parser.VectorSelector, path []parser.Node) {
	for _, want := range []struct{ label, value string }{{"job", "$job"}, {"instance", "$instance"}} {
		found := false
		for _, m := range v.LabelMatchers {
			found = found || (m.Name == want.label && m.Value == want.value)
		}
		if !found {
			l.add("target-"+want.label+"-rule", where, "%s has no %s=~%q", v.Name, want.label, want.value)
		}
	}
	if l.known != nil && !l.known[v.Name] {
		l.add("target-metric-rule", where, "no metric %s", v.Name)
	}
	if counterName.MatchString(v.Name) {
		rated := false
		for _, p := range path {
			if c, ok := p.(*parser.Call); ok && counterFuncs[c.Func.Name] {
				rated = true
			}
		}
		if !rated {
			l.add("target-counter-agg-rule", where, "counter %s must be read through rate, irate or increase", v.Name)
		}
	}
}
