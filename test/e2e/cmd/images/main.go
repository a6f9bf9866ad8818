package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/hostedcp/cluster-api-provider-hosted/test/e2e/images"
)

func main() {
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer cancel()
	root, err := os.Getwd()
	if err == nil {
		var list []images.Image
		if list, err = images.Ensure(ctx, root, os.Stderr); err == nil {
			for _, img := range list {
				fmt.Printf("%s\t%s\n", img.Ref, img.Tar)
			}
			return
		}
	}
	fmt.Fprintln(os.Stderr, "images:", err)
	cancel()
	os.Exit(1)
}
