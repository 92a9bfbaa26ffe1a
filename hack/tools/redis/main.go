// Command redis serves an in-memory Redis (miniredis) on a loopback port until it
// is interrupted or terminated. Argo CD's application controller and repo-server
// need a Redis for their caches; nothing is persisted.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/alicebob/miniredis/v2"
)

func main() {
	port := flag.Int("port", 6379, "TCP port to listen on, on 127.0.0.1 only")
	flag.Parse()
	if err := run(net.JoinHostPort("127.0.0.1", strconv.Itoa(*port))); err != nil {
		fmt.Fprintln(os.Stderr, "redis:", err)
		os.Exit(1)
	}
}

func run(addr string) error {
	srv := miniredis.NewMiniRedis()
	if err := srv.StartAddr(addr); err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	defer srv.Close()
	fmt.Println("redis: serving on", srv.Addr())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	return nil
}
