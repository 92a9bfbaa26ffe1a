package kube

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/tools/reference"
)

// SyncRecorder records Kubernetes Events synchronously, one create per call. It suits
// one-shot commands, which exit before client-go's asynchronous broadcaster would
// flush; long-running services use record.EventRecorder instead. Failures are logged,
// never returned: an Event is a courtesy, not part of the operation.
type SyncRecorder struct {
	Client    kubernetes.Interface
	Component string
	Logger    *slog.Logger
	// Timeout bounds each create; zero means 5 s.
	Timeout time.Duration
}

// Eventf implements core.Recorder (the record.EventRecorder method of the same name).
func (r *SyncRecorder) Eventf(obj runtime.Object, eventtype, reason, messageFmt string, args ...interface{}) {
	ref, err := reference.GetReference(scheme.Scheme, obj)
	if err != nil {
		r.log().Warn("cannot record event", "reason", reason, "err", err)
		return
	}
	now := metav1.NewTime(time.Now())
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("%s.%s", ref.Name, rand.String(10)), Namespace: ref.Namespace},
		InvolvedObject: *ref,
		Reason:         reason,
		Message:        fmt.Sprintf(messageFmt, args...),
		Type:           eventtype,
		Source:         corev1.EventSource{Component: r.Component},
		FirstTimestamp: now,
		LastTimestamp:  now,
		Count:          1,
	}
	timeout := r.Timeout
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if _, err := r.Client.CoreV1().Events(ref.Namespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		r.log().Warn("cannot record event", "reason", reason, "object", ref.Name, "err", err)
	}
}

func (r *SyncRecorder) log() *slog.Logger {
	if r.Logger != nil {
		return r.Logger
	}
	return slog.Default()
}

// NewBroadcastRecorder returns client-go's asynchronous, rate-limited and aggregating
// event recorder (record.EventBroadcaster) writing to client, for long-running services,
// and the function that stops its broadcaster. Events are recorded with source component
// UserAgent.
//
// Normal Events (one "Attached" per object changed) share one spam-filter bucket per
// namespace and reason (EventBurst, then EventQPS), where client-go's default bucket is
// per object: a burst of a thousand new ReplicaSets in a namespace writes EventBurst
// Events, not a thousand, so that an attach costs its PATCH and no second write
// (docs/design.md, "Events"). Warnings keep a bucket per object.
//
// The broadcaster (two goroutines and two queues of a thousand Events) starts with the
// first Event: a cluster that never has one to record costs none of it
// (docs/design.md, "Per-cluster cost"). After the stop function, Events are dropped.
func NewBroadcastRecorder(client kubernetes.Interface) (record.EventRecorder, func()) {
	l := &lazyRecorder{start: func() (record.EventRecorder, func()) {
		b := record.NewBroadcaster(record.WithCorrelatorOptions(record.CorrelatorOptions{
			BurstSize: EventBurst, QPS: EventQPS, SpamKeyFunc: EventSpamKey}))
		b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
		return b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: UserAgent}), b.Shutdown
	}}
	return l, l.stop
}

// lazyRecorder is a record.EventRecorder whose recorder is built by start on first use.
type lazyRecorder struct {
	start    func() (record.EventRecorder, func())
	mu       sync.Mutex
	rec      record.EventRecorder
	shutdown func()
	stopped  bool
}

// get returns the recorder, built now if need be; nil once stopped.
func (l *lazyRecorder) get() record.EventRecorder {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return nil
	}
	if l.rec == nil {
		l.rec, l.shutdown = l.start()
	}
	return l.rec
}

func (l *lazyRecorder) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = true
	if l.shutdown != nil {
		l.shutdown() // flushes the Events queued
		l.shutdown = nil
	}
}

func (l *lazyRecorder) Event(obj runtime.Object, eventtype, reason, message string) {
	if r := l.get(); r != nil {
		r.Event(obj, eventtype, reason, message)
	}
}

func (l *lazyRecorder) Eventf(obj runtime.Object, eventtype, reason, messageFmt string, args ...interface{}) {
	if r := l.get(); r != nil {
		r.Eventf(obj, eventtype, reason, messageFmt, args...)
	}
}

func (l *lazyRecorder) AnnotatedEventf(obj runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...interface{}) {
	if r := l.get(); r != nil {
		r.AnnotatedEventf(obj, annotations, eventtype, reason, messageFmt, args...)
	}
}

// The spam filter of NewBroadcastRecorder: EventBurst Events at once per bucket, then
// EventQPS a second.
const (
	EventBurst = 50
	EventQPS   = 1
)

// EventSpamKey is the spam-filter bucket of an Event (record.EventSpamKeyFunc): its
// source, namespace, type and reason for a Normal Event; a Warning's involved object too.
func EventSpamKey(ev *corev1.Event) string {
	key := []string{ev.Source.Component, ev.Source.Host, ev.InvolvedObject.Namespace, ev.Type, ev.Reason}
	if ev.Type != corev1.EventTypeNormal {
		key = append(key, ev.InvolvedObject.Kind, ev.InvolvedObject.Name, string(ev.InvolvedObject.UID))
	}
	return strings.Join(key, "/")
}
