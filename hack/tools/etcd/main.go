// Command etcd is the etcd server (go.etcd.io/etcd/server/v3 etcdmain), built at the
// version this module pins, for the local control plane.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
