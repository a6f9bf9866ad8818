package main

import (
	"context"
	"flag"
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
	conformance := flag.Bool("conformance", false, "build the Kubernetes conformance suite and its test images instead, and print the images the suite lists that none provides")
	flag.Parse()
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer cancel()
	root, err := envtest.RepoRoot()
	if err != nil {
		return err
	}
	if *conformance {
		return ensureConformance(ctx, root)
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

func ensureConformance(ctx context.Context, root string) error {
	suite, err := images.EnsureConformance(ctx, root, os.Stderr)
	if err != nil {
		return err
	}
	fmt.Printf("suite\t%s\nginkgo\t%s\n", suite.Suite, suite.Ginkgo)
	for _, img := range suite.Images {
		fmt.Printf("%s\t%s\n", img.Ref, img.Tar)
	}
	for _, ref := range suite.Missing {
		fmt.Printf("%s\tnot built: a test that runs it fails\n", ref)
	}
	return nil
}
