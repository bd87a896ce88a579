// Command etcd is the upstream etcd server, built from the
// go.etcd.io/etcd/server/v3 module pinned in this directory's go.mod.
//
// It lives in its own module because k8s.io/kubernetes v1.36.3 requires a
// newer etcd server (v3.6.8) and would otherwise move this one.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
