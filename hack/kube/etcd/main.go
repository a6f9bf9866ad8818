// Command etcd is the upstream etcd server, built at the version Kubernetes
// v1.36 pins, for tests and the local management cluster.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
