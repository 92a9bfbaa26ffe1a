// Command configmap-attacher makes ConfigMap and Secret revisions owned by the
// ReplicaSets that use them. See the README for the commands.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/configmap-attacher/configmap-attacher/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], cli.Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
	stop()
	os.Exit(code)
}
