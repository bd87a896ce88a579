// Command registry serves an in-memory OCI registry (go-containerregistry's
// pkg/registry) on a loopback address until it is interrupted, for
// `make image-push bundle-push catalog-push` on a machine without one:
//
//	go run ./hack/registry                      # 127.0.0.1:5000
//	go run ./hack/registry --addr 127.0.0.1:5001 --user me --password secret
//
// Clients reach 127.0.0.1 and localhost over plain HTTP. With --user, every
// request needs those basic credentials (docker login / ~/.docker/config.json).
// Images live in memory: they are gone when it stops.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/helmapp/helm-app-operator/internal/tooling/image"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:5000", "Address to serve on.")
	user := flag.String("user", "", "Require basic authentication as this user.")
	password := flag.String("password", "", "The user's password.")
	flag.Parse()
	r, err := image.ServeRegistry(*addr, *user, *password)
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
	fmt.Printf("registry: serving on %s (in memory; Ctrl-C stops it)\n", r.Host)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	_ = r.Close()
}
