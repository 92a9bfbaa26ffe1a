package trigger

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"sigs.k8s.io/yaml"

	"github.com/configmap-attacher/configmap-attacher/eventsource"
	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

// Defaults of Config.
const (
	DefaultMaxInFlight    = 64
	DefaultExecuteTimeout = 30 * time.Second
	// MaxSpecBytes bounds a trigger spec document (YAML or JSON).
	MaxSpecBytes = 64 << 10
)

// ErrBusy means the service already handles Config.MaxInFlight events; the caller
// should retry later (gRPC ResourceExhausted, HTTP 429).
var ErrBusy = errors.New("too many events in flight")

// ErrUnsupported means the request asks for something this service does not do (gRPC
// Unimplemented, HTTP 501).
var ErrUnsupported = errors.New("unsupported")

// Config configures a Service.
type Config struct {
	// Clusters resolves the event's cluster to an Attacher. Required.
	Clusters Clusters
	// MaxInFlight bounds the events handled at once (gRPC and HTTP together); more are
	// refused with ErrBusy. Zero means DefaultMaxInFlight.
	MaxInFlight int
	// ExecuteTimeout bounds the work for one event (the Sensor calls without a
	// deadline). Zero means DefaultExecuteTimeout.
	ExecuteTimeout time.Duration
	// Ready reports readiness (informer caches synced); nil means always ready.
	Ready func() bool
	// ReadyDetail, when set, returns lines appended to the /readyz answer (for example
	// one per cluster saying which is down); nil means none.
	ReadyDetail func() string
	// Metrics receives the service's metrics; nil means a private set (see Metrics).
	Metrics *Metrics
	// Logger receives logs; nil means slog.Default().
	Logger *slog.Logger
}

// Service is what both transports call: it parses specs, bounds concurrency and time,
// picks the cluster and runs the core. It is safe for concurrent use.
type Service struct {
	clusters Clusters
	timeout  time.Duration
	sem      chan struct{}
	ready    func() bool
	detail   func() string
	metrics  *Metrics
	log      *slog.Logger
	wg       sync.WaitGroup

	sweep       SweepFunc
	afterAttach AfterAttachFunc
}

// NewService returns a Service for cfg; cfg.Clusters is required.
func NewService(cfg Config) (*Service, error) {
	if cfg.Clusters == nil {
		return nil, errors.New("trigger: Config.Clusters is required")
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	if cfg.ExecuteTimeout <= 0 {
		cfg.ExecuteTimeout = DefaultExecuteTimeout
	}
	if cfg.Ready == nil {
		cfg.Ready = func() bool { return true }
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Service{clusters: cfg.Clusters, timeout: cfg.ExecuteTimeout, sem: make(chan struct{}, cfg.MaxInFlight),
		ready: cfg.Ready, detail: cfg.ReadyDetail, metrics: cfg.Metrics, log: cfg.Logger}, nil
}

// ReadyDetail returns Config.ReadyDetail's lines ("" without one).
func (s *Service) ReadyDetail() string {
	if s.detail == nil {
		return ""
	}
	return s.detail()
}

// Ready reports whether the service is ready to take events (caches synced).
func (s *Service) Ready() bool { return s.ready() }

// Metrics returns the service's metrics.
func (s *Service) Metrics() *Metrics { return s.metrics }

// Wait blocks until every event being handled has finished.
func (s *Service) Wait() { s.wg.Wait() }

// Response is the JSON result of one event, returned by gRPC Execute and HTTP POST:
// the core's Result plus a one-line message, or the reason the event was ignored.
type Response struct {
	core.Result
	// Message summarises the outcome ("ReplicaSet shop/web: 1 attached").
	Message string `json:"message"`
	// Ignored is set, with the reason, when the event was acknowledged without work
	// (not an ADD event). Nothing was changed.
	Ignored string `json:"ignored,omitempty"`
	// GC is the sweep report of an `operation: gc` event.
	GC any `json:"gc,omitempty"`
	// Error is the error the event ended with, if any.
	Error string `json:"error,omitempty"`
}

// ParseSpec parses a trigger spec document, YAML or JSON (the Sensor sends YAML to
// FetchResource and the JSON returned by it, after parameters, to Execute), and
// validates it with core.ParseSpec. Non-string scalars (true, 3) are taken as their
// text. Errors are *core.FieldError: "spec" for the document as a whole, the key
// otherwise.
func ParseSpec(doc []byte) (core.Options, error) {
	m, err := specMap(doc)
	if err != nil {
		return core.Options{}, err
	}
	return core.ParseSpec(m)
}

func specMap(doc []byte) (map[string]string, error) {
	if len(doc) > MaxSpecBytes {
		return nil, core.Invalidf("spec", "is %d bytes, at most %d are accepted", len(doc), MaxSpecBytes)
	}
	if !utf8.Valid(doc) {
		return nil, core.Invalidf("spec", "is not valid UTF-8")
	}
	if strings.TrimSpace(string(doc)) == "" {
		return map[string]string{}, nil
	}
	if multiDocument.Match(bytes.TrimPrefix(bytes.TrimLeft(doc, " \t\r\n"), []byte("---"))) {
		return nil, core.Invalidf("spec", "holds more than one YAML document; send one map")
	}
	js, err := yamlToJSON(doc)
	if err != nil {
		if m := duplicateKey.FindStringSubmatch(err.Error()); m != nil {
			if m[1] == "" {
				return nil, core.Invalidf("spec", "has an empty key, given more than once")
			}
			return nil, core.Invalidf(core.Clip(m[1]), "is given more than once")
		}
		return nil, core.Invalidf("spec", "not a YAML or JSON map: %s", core.Clip(core.OneLine(err.Error())))
	}
	var raw any
	dec := json.NewDecoder(strings.NewReader(string(js)))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return nil, core.Invalidf("spec", "not a YAML or JSON map: %s", core.Clip(err.Error()))
	}
	if raw == nil {
		return map[string]string{}, nil
	}
	obj, ok := raw.(map[string]any)
	if !ok {
		return nil, core.Invalidf("spec", "must be a map of keys to strings, got %T", raw)
	}
	out := make(map[string]string, len(obj))
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys) // report the first bad key in a stable order
	for _, k := range keys {
		switch v := obj[k].(type) {
		case nil:
			out[k] = ""
		case string:
			out[k] = v
		case bool:
			out[k] = strconv.FormatBool(v)
		case json.Number:
			out[k] = v.String()
		default:
			return nil, core.Invalidf(core.Clip(k), "must be a string, got a %s", kindOf(v))
		}
	}
	return out, nil
}

// yamlToJSON converts YAML (or JSON) to JSON; the YAML parser's own panics on
// malformed input become errors.
func yamlToJSON(doc []byte) (js []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("malformed document")
		}
	}()
	// Strict: a key given twice ("dryRun: true" then "dryRun: false") is an error, not
	// "last one wins".
	return yaml.YAMLToJSONStrict(doc)
}

// duplicateKey finds the key the strict YAML parser reports as given twice.
var duplicateKey = regexp.MustCompile(`key "([^"]*)" already set in map`)

// multiDocument finds a YAML document separator after the first document.
var multiDocument = regexp.MustCompile(`(?m)^(---|\.\.\.)(\s|$)`)

func kindOf(v any) string {
	switch v.(type) {
	case map[string]any:
		return "map"
	case []any:
		return "list"
	}
	return fmt.Sprintf("%T", v)
}

// NormalizedSpec returns the normalised spec of o as JSON: every key with its effective
// value. It is FetchResource's answer.
func NormalizedSpec(o core.Options) ([]byte, error) {
	b, err := json.Marshal(o.Spec())
	if err != nil {
		return nil, fmt.Errorf("encoding the spec: %w", err)
	}
	return b, nil
}

// Handle runs one decoded event with the given options: it takes an in-flight slot
// (ErrBusy if none is free), bounds the work with the execute timeout, resolves the
// cluster (spec, event metadata, CloudEvent extension, default) and runs the core.
// path labels metrics ("grpc", "http"). The error wraps core.ErrInvalid (unknown
// cluster), core.ErrRefused, core.ErrUnavailable, context.DeadlineExceeded, ErrBusy or
// ErrUnsupported, or is an object failure reported in the Response.
func (s *Service) Handle(ctx context.Context, path string, opts core.Options, d eventsource.Decoded) (Response, error) {
	start := time.Now()
	resp, err := s.handle(ctx, opts, d)
	s.metrics.observe(path, start, &resp, err)
	if err != nil {
		resp.Error = err.Error()
	}
	lv := slog.LevelInfo
	if err != nil && !errors.Is(err, core.ErrRefused) {
		lv = slog.LevelWarn
	}
	s.log.Log(ctx, lv, "event", "path", path, "cluster", resp.Cluster, "namespace", d.Event.Namespace,
		"replicaSet", d.Event.Name, "message", resp.Message, "err", err, "duration", time.Since(start))
	return resp, err
}

func (s *Service) handle(ctx context.Context, opts core.Options, d eventsource.Decoded) (Response, error) {
	resp := Response{Result: core.Result{Namespace: d.Event.Namespace, ReplicaSet: d.Event.Name, Objects: []core.ObjectResult{}}}
	release, err := s.acquire()
	if err != nil {
		resp.Message = err.Error()
		return resp, err
	}
	defer release()

	a, err := s.clusters.Attacher(d.Cluster(opts.Cluster))
	if err != nil {
		resp.Message = err.Error()
		return resp, err
	}
	ctx, cancel := context.WithTimeoutCause(ctx, s.timeout, fmt.Errorf("%w: the event took longer than %s", context.DeadlineExceeded, s.timeout))
	defer cancel()
	if opts.Operation == core.OperationGC {
		ns := d.Event.Namespace
		if opts.Namespace != "" {
			ns = opts.Namespace
		}
		resp.Cluster, resp.DryRun = a.Cluster(), opts.DryRun
		if err := a.CheckNamespace(ns); err != nil {
			resp.Message = err.Error()
			return resp, err
		}
		return resp, s.gc(ctx, a.Cluster(), ns, opts.DryRun, &resp)
	}
	ev := d.Event
	ev.Cluster = a.Cluster()
	ev.Options = opts
	res, err := a.Attach(ctx, ev)
	resp.Result = res
	resp.Message = res.Summary()
	if s.afterAttach != nil && res.Writes() > 0 {
		s.afterAttach(res.Cluster, res.Namespace)
	}
	if err != nil && ctx.Err() != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		// The core may report a cut-short request as a plain transient failure.
		err = fmt.Errorf("%w: %w", context.Cause(ctx), err)
	}
	return resp, err
}

// Ignore builds the answer for an event that is acknowledged without work (a non-ADD
// event), and counts it.
func (s *Service) Ignore(path string, d eventsource.Decoded, reason error) Response {
	s.metrics.events.WithLabelValues("", path, "ignored").Inc()
	s.log.Debug("event ignored", "path", path, "reason", reason)
	return Response{Result: core.Result{Namespace: d.Event.Namespace, ReplicaSet: d.Event.Name, Objects: []core.ObjectResult{}},
		Ignored: reason.Error(), Message: "ignored: " + reason.Error()}
}

func (s *Service) acquire() (func(), error) {
	select {
	case s.sem <- struct{}{}:
	default:
		return nil, fmt.Errorf("%w (limit %d); retry later", ErrBusy, cap(s.sem))
	}
	s.wg.Add(1)
	s.metrics.inFlight.Inc()
	return func() {
		s.metrics.inFlight.Dec()
		<-s.sem
		s.wg.Done()
	}, nil
}
