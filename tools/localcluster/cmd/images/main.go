package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/hostedcp/cluster-api-provider-hosted/test/envtest"
	"github.com/hostedcp/cluster-api-provider-hosted/tools/localcluster/images"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer cancel()
	root, err := envtest.RepoRoot()
	if err != nil {
		return err
	}
	list, err := images.Ensure(ctx, root, os.Stderr)
	if err != nil {
		return err
	}
	for _, img := range list {
		fmt.Printf("%s\t%s\n", img.Ref, img.Tar)
	}
	return nil
}
