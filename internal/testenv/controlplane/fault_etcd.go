package controlplane

import (
	"context"
	"errors"
	"sync"
)

// stoppedEtcd keeps the arguments of a stopped etcd per control plane, for RestartEtcd.
var stoppedEtcd sync.Map // *ControlPlane → []string

// StopEtcd stops only etcd (SIGTERM, then SIGKILL after 10 s), leaving kube-apiserver and
// kube-controller-manager running: the apiserver then answers reads from its watch cache
// at best and fails or stalls writes, as when etcd is briefly unavailable. RestartEtcd
// brings it back with the same data. It returns an error if no etcd is running.
func (cp *ControlPlane) StopEtcd() error {
	args, err := cp.stopProcess("etcd")
	if err != nil {
		return err
	}
	stoppedEtcd.Store(cp, args)
	return nil
}

// RestartEtcd starts etcd again with the same flags and data directory (same ports, so
// kube-apiserver reconnects by itself) and waits until etcd is healthy and the apiserver's
// /readyz answers again. It is an error if StopEtcd was not called first.
func (cp *ControlPlane) RestartEtcd(ctx context.Context) error {
	v, ok := stoppedEtcd.LoadAndDelete(cp)
	if !ok {
		return errors.New("controlplane: etcd was not stopped by StopEtcd")
	}
	if err := cp.run("etcd", v.([]string)); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, cp.opts.StartTimeout)
	defer cancel()
	if err := cp.waitEtcdHealthy(ctx); err != nil {
		return err
	}
	if err := cp.waitAPIServerReady(ctx); err != nil {
		return err
	}
	cp.opts.Logf("controlplane %s: etcd restarted at %s", cp.opts.Name, cp.etcdURL)
	return nil
}
