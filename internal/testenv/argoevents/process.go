package argoevents

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/argoproj/argo-events/pkg/apis/events/v1alpha1"
	"k8s.io/client-go/tools/clientcmd"
)

// DefaultStreamConfig is the JetStream stream configuration Argo Events' controller would
// pass (its defaults, one replica).
const DefaultStreamConfig = "maxMsgs: 50000\nmaxAge: 168h\nmaxBytes: -1\nreplicas: 1\nduplicates: 300s\n"

// Config describes one Argo Events process: an eventsource-service for EventSource, or a
// sensor-service for Sensor (exactly one must be set).
type Config struct {
	// Binary is the argo-events executable; default <repo>/bin/argo-events.
	Binary string
	// EventSource runs `argo-events eventsource-service` with this object.
	EventSource *v1alpha1.EventSource
	// Sensor runs `argo-events sensor-service` with this object.
	Sensor *v1alpha1.Sensor
	// EventBusURL is the JetStream URL, e.g. nats://127.0.0.1:4222 (always dialled with TLS
	// by Argo Events).
	EventBusURL string
	// StreamConfig is the JetStream stream configuration; default DefaultStreamConfig.
	StreamConfig string
	// Kubeconfig is the kubeconfig file the process uses (required for the resource
	// EventSource and for the Sensor's Kubernetes client).
	Kubeconfig string
	// PodName identifies the process in logs and leader election; default the object name.
	PodName string
	// LogFile receives the process's stdout and stderr; default a file in a temp dir.
	LogFile string
	// Shared runs the process in the host network namespace. By default each process gets
	// its own network namespace (root needed), because every Argo Events process binds
	// :7777 for metrics and a second one in the same namespace would exit.
	Shared bool
	// BridgePorts are extra host loopback ports the isolated process must reach. The ports
	// of EventBusURL, of the kubeconfig's server and of loopback trigger URLs (custom
	// trigger serverURL, HTTP trigger url) are bridged automatically.
	BridgePorts []int
	// Env is extra environment (KEY=VALUE) for the process.
	Env []string
}

// Process is a running Argo Events process.
type Process struct {
	name    string
	cmd     *exec.Cmd
	logFile string
	log     *os.File
	bridge  *bridge
	done    chan struct{}
	waitErr error
	stop    sync.Once
}

// Start starts the process described by cfg. ctx bounds only the start; stop the process
// with Stop (or use Run).
func Start(ctx context.Context, cfg Config) (*Process, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("argoevents: start: %w", err)
	}
	env, sub, name, err := environment(cfg)
	if err != nil {
		return nil, err
	}
	bin := cfg.Binary
	if bin == "" {
		root, err := RepoRoot()
		if err != nil {
			return nil, fmt.Errorf("argoevents: %w", err)
		}
		bin = filepath.Join(root, "bin", "argo-events")
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("argoevents: binary %s (build it with `make tools` or hack/tools/build.sh argo-events): %w", bin, err)
	}
	logFile := cfg.LogFile
	if logFile == "" {
		dir, err := os.MkdirTemp("", "argo-events-"+name+"-")
		if err != nil {
			return nil, fmt.Errorf("argoevents: log dir: %w", err)
		}
		logFile = filepath.Join(dir, sub+".log")
	}
	lf, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("argoevents: open log: %w", err)
	}

	cmd := exec.Command(bin, sub)
	cmd.Env = append(os.Environ(), env...)
	cmd.Env = append(cmd.Env, cfg.Env...)
	cmd.Stdout, cmd.Stderr = lf, lf
	// Own process group, and killed if this process dies (a test binary that panics must
	// not leave Argo Events processes behind).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}

	p := &Process{name: sub + "/" + name, cmd: cmd, logFile: logFile, log: lf, done: make(chan struct{})}
	if cfg.Shared {
		if err := cmd.Start(); err != nil {
			_ = lf.Close()
			return nil, fmt.Errorf("argoevents: start %s: %w", p.name, err)
		}
	} else {
		if !isolationSupported {
			_ = lf.Close()
			return nil, errors.New("argoevents: network namespaces need Linux; set Shared and run one process at a time")
		}
		ports, err := bridgePorts(cfg)
		if err != nil {
			_ = lf.Close()
			return nil, err
		}
		b, err := startIsolated(cmd, ports)
		if err != nil {
			_ = lf.Close()
			return nil, fmt.Errorf("argoevents: start %s: %w", p.name, err)
		}
		p.bridge = b
	}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Run starts the process and waits until ctx is cancelled (then stops it and returns nil)
// or the process exits on its own (an error, with the tail of its log).
func Run(ctx context.Context, cfg Config) error {
	p, err := Start(ctx, cfg)
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return p.Stop()
	case <-p.done:
		_ = p.Stop()
		return fmt.Errorf("argoevents: %s exited: %w\n%s", p.name, p.exitErr(), p.Tail(40))
	}
}

// Name is "<subcommand>/<object name>".
func (p *Process) Name() string { return p.name }

// LogFile is the file holding the process's output.
func (p *Process) LogFile() string { return p.logFile }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited, and its exit error.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.exitErr()
	default:
		return false, nil
	}
}

func (p *Process) exitErr() error {
	if p.waitErr == nil {
		return errors.New("exit status 0")
	}
	return p.waitErr
}

// Logs returns the whole log so far.
func (p *Process) Logs() string {
	b, err := os.ReadFile(p.logFile)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", p.logFile, err)
	}
	return string(b)
}

// Tail returns the last n lines of the log.
func (p *Process) Tail(n int) string {
	lines := strings.Split(strings.TrimRight(p.Logs(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// WaitForLog waits until the log contains substr, the process exits, or ctx ends.
func (p *Process) WaitForLog(ctx context.Context, substr string) error {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		if b, err := os.ReadFile(p.logFile); err == nil && bytes.Contains(b, []byte(substr)) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("argoevents: %s: waiting for %q: %w", p.name, substr, ctx.Err())
		case <-p.done:
			if b, err := os.ReadFile(p.logFile); err == nil && bytes.Contains(b, []byte(substr)) {
				return nil
			}
			return fmt.Errorf("argoevents: %s exited (%w) before logging %q", p.name, p.exitErr(), substr)
		case <-t.C:
		}
	}
}

// Stop sends SIGTERM, waits up to 10 seconds, then kills the process group; it closes the
// bridge and the log. It returns nil when the process ended by the signal. Safe to call
// more than once.
func (p *Process) Stop() error {
	var err error
	p.stop.Do(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-p.done:
			case <-time.After(10 * time.Second):
				_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
				<-p.done
			}
		}
		var ee *exec.ExitError
		if p.waitErr != nil && !(errors.As(p.waitErr, &ee) && ee.ProcessState.Sys().(syscall.WaitStatus).Signaled()) {
			// Argo Events exits 0 or 1 on SIGTERM depending on the component; both are fine.
			if ee == nil || ee.ExitCode() > 1 {
				err = fmt.Errorf("argoevents: %s: %w", p.name, p.waitErr)
			}
		}
		if berr := p.bridge.Close(); berr != nil && err == nil {
			err = fmt.Errorf("argoevents: %s: close bridge: %w", p.name, berr)
		}
		_ = p.log.Close()
	})
	return err
}

// environment builds the process environment, the subcommand and the object name.
func environment(cfg Config) (env []string, sub, name string, err error) {
	var obj any
	switch {
	case cfg.EventSource != nil && cfg.Sensor != nil:
		return nil, "", "", errors.New("argoevents: set EventSource or Sensor, not both")
	case cfg.EventSource != nil:
		obj, sub, name = cfg.EventSource, "eventsource-service", cfg.EventSource.Name
		env = append(env, v1alpha1.EnvVarEventSourceObject+"=")
	case cfg.Sensor != nil:
		obj, sub, name = cfg.Sensor, "sensor-service", cfg.Sensor.Name
		env = append(env, v1alpha1.EnvVarSensorObject+"=")
	default:
		return nil, "", "", errors.New("argoevents: set EventSource or Sensor")
	}
	if cfg.EventBusURL == "" {
		return nil, "", "", errors.New("argoevents: EventBusURL is required")
	}
	if cfg.Kubeconfig == "" {
		return nil, "", "", errors.New("argoevents: Kubeconfig is required")
	}
	objJSON, err := json.Marshal(obj)
	if err != nil {
		return nil, "", "", fmt.Errorf("argoevents: encode %s: %w", name, err)
	}
	env[0] += base64.StdEncoding.EncodeToString(objJSON)

	stream := cfg.StreamConfig
	if stream == "" {
		stream = DefaultStreamConfig
	}
	bus, err := json.Marshal(v1alpha1.BusConfig{JetStream: &v1alpha1.JetStreamConfig{URL: cfg.EventBusURL, StreamConfig: stream}})
	if err != nil {
		return nil, "", "", fmt.Errorf("argoevents: encode bus config: %w", err)
	}
	pod := cfg.PodName
	if pod == "" {
		pod = name + "-0"
	}
	env = append(env,
		v1alpha1.EnvVarEventBusConfig+"="+base64.StdEncoding.EncodeToString(bus),
		v1alpha1.EnvVarEventBusSubject+"=eventbus-default", // required, unused by JetStream
		v1alpha1.EnvVarPodName+"="+pod,
		v1alpha1.EnvVarKubeConfig+"="+cfg.Kubeconfig,
	)
	return env, sub, name, nil
}

// bridgePorts collects the host loopback ports an isolated process needs.
func bridgePorts(cfg Config) ([]int, error) {
	ports := slices.Clone(cfg.BridgePorts)
	add := func(target string) {
		if p, ok := loopbackPort(target); ok {
			ports = append(ports, p)
		}
	}
	add(cfg.EventBusURL)
	kc, err := clientcmd.LoadFromFile(cfg.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("argoevents: read kubeconfig: %w", err)
	}
	for _, c := range kc.Clusters {
		add(c.Server)
	}
	if cfg.Sensor != nil {
		for _, t := range cfg.Sensor.Spec.Triggers {
			if t.Template == nil {
				continue
			}
			if ct := t.Template.CustomTrigger; ct != nil {
				add(ct.ServerURL)
			}
			if h := t.Template.HTTP; h != nil {
				add(h.URL)
			}
		}
	}
	slices.Sort(ports)
	return slices.Compact(ports), nil
}
