// Command configmap-attacher-dev is configmap-attacher plus the development harness:
// `dev` (make run: the service on a local control plane with NATS) and `demo` (make
// demo). It is never shipped; the image builds cmd/configmap-attacher.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/configmap-attacher/configmap-attacher/internal/cli"
	"github.com/configmap-attacher/configmap-attacher/internal/dev/devcli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], cli.Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}, devcli.Commands()...)
	stop()
	os.Exit(code)
}
