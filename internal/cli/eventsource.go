package cli

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/configmap-attacher/configmap-attacher/eventsource"
	"github.com/configmap-attacher/configmap-attacher/internal/ingress/eventbus"
	"github.com/configmap-attacher/configmap-attacher/internal/kube"
)

// EventSourceOptions are the flags of `configmap-attacher eventsource`.
type EventSourceOptions struct {
	EventBus            EventBusFlags
	EventSourceName     string
	EventName           string
	Metadata            []string
	Namespace           string
	Selector            string
	Kubeconfig, Context string
	LogLevel, LogFormat string
}

// DefaultEventSourceOptions match the shipped EventSource (eventsource/replicasets.eventsource.yaml).
func DefaultEventSourceOptions() EventSourceOptions {
	return EventSourceOptions{EventSourceName: "replicasets", EventName: "replicaset-add", LogLevel: "info", LogFormat: "text"}
}

// Validate checks the options.
func (o *EventSourceOptions) Validate() (eventbus.Conn, map[string]string, error) {
	conn, err := o.EventBus.Conn()
	if err != nil {
		return conn, nil, err
	}
	if o.EventSourceName == "" || o.EventName == "" {
		return conn, nil, usagef("--event-source-name and --event-name are required")
	}
	if o.Selector != "" {
		if _, err := labels.Parse(o.Selector); err != nil {
			return conn, nil, usagef("--selector: %v", err)
		}
	}
	md, err := parseKeyValues("--metadata", o.Metadata)
	return conn, md, err
}

func newEventSourceCommand(s *Streams) *cobra.Command {
	o := DefaultEventSourceOptions()
	cmd := &cobra.Command{
		Use:   "eventsource --eventbus-url URL",
		Short: "Publish ReplicaSet ADD events to an Argo Events EventBus, in the resource EventSource's format",
		Long: `eventsource watches ReplicaSets and publishes an ADD event for each (existing ones at
start included) to the EventBus subject default.<event-source-name>.<event-name>,
exactly as Argo Events' resource EventSource does, so Sensors and the service's EventBus
subscription work in clusters where the Argo Events EventSource is not installed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.Run(cmd.Context(), s) },
	}
	fs := cmd.Flags()
	o.EventBus.AddFlags(fs)
	fs.StringVar(&o.EventSourceName, "event-source-name", o.EventSourceName, "EventSource name (the subject's second part)")
	fs.StringVar(&o.EventName, "event-name", o.EventName, "event name (the subject's third part)")
	fs.StringArrayVar(&o.Metadata, "metadata", o.Metadata, "key=value added to every event's metadata (repeat), e.g. cluster=east")
	fs.StringVarP(&o.Namespace, "namespace", "n", o.Namespace, "watch one namespace (default: all)")
	fs.StringVarP(&o.Selector, "selector", "l", o.Selector, "label selector for ReplicaSets")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig file (default $KUBECONFIG or ~/.kube/config, then in-cluster)")
	fs.StringVar(&o.Context, "context", o.Context, "kubeconfig context")
	fs.StringVar(&o.LogLevel, "log-level", o.LogLevel, "log level: debug, info, warn, error")
	fs.StringVar(&o.LogFormat, "log-format", o.LogFormat, "log format: text or json")
	return cmd
}

// Run publishes until ctx ends.
func (o *EventSourceOptions) Run(ctx context.Context, s *Streams) error {
	conn, md, err := o.Validate()
	if err != nil {
		return err
	}
	log, err := NewLogger(s.Err, o.LogLevel, o.LogFormat)
	if err != nil {
		return err
	}
	cfg, err := kube.RESTConfig(kube.ConfigOptions{Kubeconfig: o.Kubeconfig, Context: o.Context})
	if err != nil {
		return err
	}
	clients, err := kube.NewClients(cfg)
	if err != nil {
		return err
	}
	nc, err := eventbus.Connect(conn, log)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	src, err := eventsource.NewSource(clients.Kube, &eventsource.Publisher{JS: js}, eventsource.SourceOptions{
		EventSourceName: o.EventSourceName, EventName: o.EventName, Metadata: md, Namespace: o.Namespace,
		LabelSelector: o.Selector, Logger: log})
	if err != nil {
		return err
	}
	return src.Run(ctx)
}
