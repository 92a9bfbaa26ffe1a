package controlplane

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/configmap-attacher/configmap-attacher/internal/testenv/harnessproc"
)

// StopAPIServer stops only kube-apiserver (SIGTERM, then SIGKILL after 10 s), leaving
// etcd and kube-controller-manager running: clients then get connection errors, as
// when a member cluster becomes unreachable. RestartAPIServer brings it back. It
// returns an error if no kube-apiserver is running.
func (cp *ControlPlane) StopAPIServer() error {
	_, err := cp.stopProcess("kube-apiserver")
	return err
}

// stopProcess stops the first running process called name (SIGTERM, then SIGKILL after
// 10 s) and forgets it; it returns the stopped process's arguments (for a restart).
func (cp *ControlPlane) stopProcess(name string) ([]string, error) {
	cp.mu.Lock()
	var found *harnessproc.Process
	kept := cp.procs[:0:0]
	for _, p := range cp.procs {
		if p.Name() == name && found == nil {
			found = p
			continue
		}
		kept = append(kept, p)
	}
	cp.procs = kept
	cp.mu.Unlock()
	if found == nil {
		return nil, fmt.Errorf("controlplane: %s is not running", name)
	}
	args := found.Args()
	found.Stop(10 * time.Second)
	cp.opts.Logf("controlplane %s: %s stopped", cp.opts.Name, name)
	return args, nil
}

// RestartAPIServer starts kube-apiserver again with the same flags (same port,
// certificates and tokens, so existing clients reconnect) and waits until /readyz
// answers. It is an error if one is already running.
func (cp *ControlPlane) RestartAPIServer(ctx context.Context) error {
	cp.mu.Lock()
	for _, p := range cp.procs {
		if p.Name() == "kube-apiserver" {
			cp.mu.Unlock()
			return errors.New("controlplane: kube-apiserver is already running")
		}
	}
	args := cp.apiserverArgs
	cp.mu.Unlock()
	if len(args) == 0 {
		return errors.New("controlplane: kube-apiserver was never started")
	}
	if err := cp.run("kube-apiserver", args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, cp.opts.StartTimeout)
	defer cancel()
	if err := cp.waitAPIServerReady(ctx); err != nil {
		return err
	}
	cp.opts.Logf("controlplane %s: kube-apiserver restarted at %s", cp.opts.Name, cp.serverURL)
	return nil
}
