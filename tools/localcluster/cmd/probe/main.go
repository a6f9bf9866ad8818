package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// version is what --version reports.
const version = "probe dev"

// serviceAccountDir is where the kubelet mounts a pod's service account.
const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount" //nolint:gosec // a path, not a credential

func main() {
	showVersion := flag.Bool("version", false, "print the version and exit")
	name := flag.String("name", "kubernetes.default.svc.cluster.local", "the name to resolve")
	var urls []string
	flag.Func("url", "a URL to GET with the service account's token; repeat for more (default https://kubernetes.default.svc/version)",
		func(u string) error { urls = append(urls, u); return nil })
	every := flag.Duration("every", 0, "once every check has passed, GET the URLs again at this interval until stopped, printing each failure and, every 5s, \"probe: <n> requests, <m> failed\"")
	var dials []string
	flag.Func("dial", "an address (host:port) to open a TCP connection to, once; repeat for more. With it, probe dials, prints and exits",
		func(a string) error { dials = append(dials, a); return nil })
	flag.Parse()
	if len(dials) > 0 {
		dial(dials)
		return
	}
	if len(urls) == 0 {
		urls = []string{"https://kubernetes.default.svc/version"}
	}
	if *showVersion {
		fmt.Println(version)
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	// Every check, until each has succeeded once: DNS and the Service may
	// come up after the pod.
	resolved, fetched := false, map[string]bool{}
	for !resolved || len(fetched) < len(urls) {
		if !resolved {
			resolved = resolve(ctx, *name)
		}
		for _, u := range urls {
			if !fetched[u] && get(ctx, u) {
				fetched[u] = true
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(2 * time.Second):
		}
	}
	fmt.Println("probe: all checks passed")
	if *every > 0 {
		count(ctx, urls, *every)
	}
	<-ctx.Done()
}

// count GETs the URLs every interval, each on a new connection with the
// token and CA as they are on disk then, until ctx ends, and prints each
// failure and a running count.
func count(ctx context.Context, urls []string, interval time.Duration) {
	var requests, failed int
	report := time.NewTicker(5 * time.Second)
	defer report.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-report.C:
			fmt.Printf("probe: %d requests, %d failed\n", requests, failed)
		case <-time.After(interval):
			for _, u := range urls {
				requests++
				if err := fetch(ctx, u, false); err != nil {
					failed++
					fmt.Printf("probe: failed %s %s: %v\n", time.Now().UTC().Format(time.StampMilli), u, err)
				}
			}
		}
	}
}

// dial opens a TCP connection to each address once and prints
// "dial <addr>: ok" or "dial <addr>: <error>".
func dial(addrs []string) {
	for _, a := range addrs {
		conn, err := net.DialTimeout("tcp", a, 3*time.Second)
		if err != nil {
			fmt.Printf("dial %s: %v\n", a, err)
			continue
		}
		_ = conn.Close()
		fmt.Printf("dial %s: ok\n", a)
	}
}

// resolve prints the addresses of name.
func resolve(ctx context.Context, name string) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupHost(ctx, name)
	if err != nil {
		fmt.Printf("resolve %s: %v\n", name, err)
		return false
	}
	fmt.Printf("resolved %s: %s\n", name, strings.Join(addrs, " "))
	return true
}

// get prints the status and body of a GET of url, authenticated with the
// pod's service account token and verifying the server with its CA.
func get(ctx context.Context, url string) bool {
	if err := fetch(ctx, url, true); err != nil {
		fmt.Printf("GET %s: %v\n", url, err)
		return false
	}
	return true
}

// fetch GETs url, printing the response when verbose.
func fetch(ctx context.Context, url string, verbose bool) error {
	token, err := os.ReadFile(serviceAccountDir + "/token")
	if err != nil {
		return err
	}
	caPEM, err := os.ReadFile(serviceAccountDir + "/ca.crt")
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return fmt.Errorf("no certificate in %s/ca.crt", serviceAccountDir)
	}
	// A connection per request, which a rotation may send to another API
	// server or present with another certificate. As long to answer as the
	// tests' reader on the host waits (pollAPIServer): on two cores busy
	// with the whole suite a request may take seconds without failing.
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		DisableKeepAlives: true,
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return err
	}
	if verbose {
		fmt.Printf("GET %s: %d %s\n", url, resp.StatusCode, strings.Join(strings.Fields(string(body)), " "))
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %s", resp.Status)
	}
	return nil
}
