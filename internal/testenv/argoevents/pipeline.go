package argoevents

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/argoproj/argo-events/pkg/apis/events/v1alpha1"
)

// Shipped holds the objects this project ships for Argo Events.
type Shipped struct {
	EventSource *v1alpha1.EventSource
	GRPCSensor  *v1alpha1.Sensor
	HTTPSensor  *v1alpha1.Sensor
}

// LoadShipped loads the shipped EventSource and Sensors from the repository at root.
func LoadShipped(root string) (Shipped, error) {
	es, err := LoadEventSourceFile(filepath.Join(root, EventSourceFile))
	if err != nil {
		return Shipped{}, err
	}
	g, err := LoadSensorFile(filepath.Join(root, GRPCSensorFile))
	if err != nil {
		return Shipped{}, err
	}
	h, err := LoadSensorFile(filepath.Join(root, HTTPSensorFile))
	if err != nil {
		return Shipped{}, err
	}
	return Shipped{EventSource: es, GRPCSensor: g, HTTPSensor: h}, nil
}

// PipelineOptions configures StartPipeline.
type PipelineOptions struct {
	// Root is the repository root (shipped objects, bin/argo-events); default RepoRoot().
	Root string
	// Binary overrides <Root>/bin/argo-events.
	Binary string
	// EventBusURL and Kubeconfig as in Config (both required).
	EventBusURL, Kubeconfig string
	// Namespace narrows the EventSource to one namespace; empty watches all.
	Namespace string
	// GRPCServer (host:port or unix:///path) starts the gRPC Sensor aimed at it.
	GRPCServer string
	// HTTPURL (e.g. http://127.0.0.1:8080) starts the HTTP Sensor aimed at it.
	HTTPURL string
	// HTTPAuth: the HTTP Sensor sends its secureHeaders, "Authorization: Bearer
	// TestHTTPToken" (ProvideSecureHeaders; the receiver must require TestHTTPToken).
	// Otherwise they are dropped, for a receiver without --http-token-file.
	HTTPAuth bool
	// Sensors are more Sensors started as they are (for example K8sPatchSensor), each
	// in its own network namespace like the shipped ones.
	Sensors []*v1alpha1.Sensor
	// LogDir receives one log file per process; default a temporary directory.
	LogDir string
}

// Pipeline is the shipped EventSource and Sensors running as real Argo Events processes.
type Pipeline struct {
	// Processes are the running processes, EventSource first.
	Processes []*Process
	// LogDir holds their logs.
	LogDir string
}

// Log lines that say a process is ready (see Process.WaitForLog).
const (
	// EventSourceReadyLog: the resource informer is being set up; it lists existing
	// objects first, so an object created from now on is seen.
	EventSourceReadyLog = "setting up informer factory"
	// SensorReadyLog: the Sensor's durable consumer exists. It delivers only messages
	// published after it was created.
	SensorReadyLog = "Subscribing to subject"
)

// StartPipeline starts the shipped Sensors (those whose target is set) and then the
// shipped EventSource, waiting until each is ready, so that every ReplicaSet created
// after it returns reaches the targets. On error, what was started is stopped.
func StartPipeline(ctx context.Context, o PipelineOptions) (_ *Pipeline, err error) {
	if o.Root == "" {
		if o.Root, err = RepoRoot(); err != nil {
			return nil, fmt.Errorf("argoevents: %w", err)
		}
	}
	if o.GRPCServer == "" && o.HTTPURL == "" && len(o.Sensors) == 0 {
		return nil, errors.New("argoevents: pipeline needs GRPCServer, HTTPURL or Sensors")
	}
	objs, err := LoadShipped(o.Root)
	if err != nil {
		return nil, fmt.Errorf("argoevents: %w", err)
	}
	if o.LogDir == "" {
		if o.LogDir, err = os.MkdirTemp("", "argo-events-"); err != nil {
			return nil, fmt.Errorf("argoevents: log dir: %w", err)
		}
	}
	if o.Namespace != "" {
		SetWatchedNamespace(objs.EventSource, o.Namespace)
	}
	p := &Pipeline{LogDir: o.LogDir}
	defer func() {
		if err != nil {
			_ = p.Stop()
		}
	}()
	start := func(cfg Config, file, ready string) error {
		cfg.Binary, cfg.EventBusURL, cfg.Kubeconfig = o.Binary, o.EventBusURL, o.Kubeconfig
		cfg.LogFile = filepath.Join(o.LogDir, file)
		proc, err := Start(ctx, cfg)
		if err != nil {
			return err
		}
		p.Processes = append(p.Processes, proc)
		if err := proc.WaitForLog(ctx, ready); err != nil {
			return fmt.Errorf("%w\n%s", err, proc.Tail(40))
		}
		return nil
	}
	if o.GRPCServer != "" {
		SetCustomTriggerServer(objs.GRPCSensor, o.GRPCServer)
		if err := start(Config{Sensor: objs.GRPCSensor}, "sensor-grpc.log", SensorReadyLog); err != nil {
			return nil, err
		}
	}
	if o.HTTPURL != "" {
		if _, err := SetHTTPTriggerURL(objs.HTTPSensor, o.HTTPURL); err != nil {
			return nil, fmt.Errorf("argoevents: %w", err)
		}
		if o.HTTPAuth {
			if _, err := ProvideSecureHeaders(objs.HTTPSensor, "Bearer "+TestHTTPToken); err != nil {
				return nil, fmt.Errorf("argoevents: %w", err)
			}
		} else {
			DropSecureHeaders(objs.HTTPSensor)
		}
		if err := start(Config{Sensor: objs.HTTPSensor}, "sensor-http.log", SensorReadyLog); err != nil {
			return nil, err
		}
	}
	for i, s := range o.Sensors {
		if err := start(Config{Sensor: s}, fmt.Sprintf("sensor-%d-%s.log", i, s.Name), SensorReadyLog); err != nil {
			return nil, err
		}
	}
	if err := start(Config{EventSource: objs.EventSource}, "eventsource.log", EventSourceReadyLog); err != nil {
		return nil, err
	}
	// The EventSource comes first in Processes, as documented.
	last := len(p.Processes) - 1
	p.Processes = append([]*Process{p.Processes[last]}, p.Processes[:last]...)
	return p, nil
}

// Stop stops every process (Sensors first, the EventSource last) and returns their errors.
func (p *Pipeline) Stop() error {
	var errs []error
	for i := len(p.Processes) - 1; i >= 0; i-- {
		if err := p.Processes[i].Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
