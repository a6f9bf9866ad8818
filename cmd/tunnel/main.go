package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/tunnel"
)

func main() { os.Exit(run()) }

func run() int {
	cmd, err := parse(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "tunnel:", err)
		return 2
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := cmd.run(ctx, log); err != nil {
		log.Error("stopped", "error", err.Error())
		return 1
	}
	log.Info("stopped")
	return 0
}

// command is a subcommand with its flags parsed.
type command interface {
	run(ctx context.Context, log *slog.Logger) error
}

const usage = `usage: tunnel server|node|keys|audit [flags]

  server  the sidecar beside kube-apiserver: ends the nodes' outer TLS and
          forwards what it carries to the API server
  node    the proxy on every worker: carries connections to the node-local
          address through the Gateway to the tenant's sidecar
  keys    the sidecar beside kube-apiserver that serves it the management
          cluster's service account issuer keys
  audit   the sidecar beside kube-apiserver that posts its audit events to
          every webhook target

Run "tunnel server -h", "tunnel node -h", "tunnel keys -h" or "tunnel audit -h"
for the flags.
`

func parse(args []string, out io.Writer) (command, error) {
	if len(args) == 0 {
		_, _ = io.WriteString(out, usage)
		return nil, errors.New("name a command: server, node, keys or audit")
	}
	switch args[0] {
	case "server":
		return parseServer(args[1:], out)
	case "node":
		return parseNode(args[1:], out)
	case "keys":
		return parseKeys(args[1:], out)
	case "audit":
		return parseAudit(args[1:], out)
	case "-h", "-help", "--help", "help":
		_, _ = io.WriteString(out, usage)
		return nil, flag.ErrHelp
	}
	return nil, fmt.Errorf("unknown command %q: want server, node, keys or audit", args[0])
}

type serverCommand struct {
	listen, healthListen, certFile, keyFile, upstream string
}

func parseServer(args []string, out io.Writer) (command, error) {
	var c serverCommand
	fs := flagSet("server", out)
	fs.StringVar(&c.listen, "listen", ":"+strconv.Itoa(contract.TunnelPort), "`address` of the outer TLS listener, where the Gateway routes kas-tunnel.<cluster>.<namespace>.<domain>")
	fs.StringVar(&c.certFile, "cert-file", "", "serving certificate for kas-tunnel.<cluster>.<namespace>.<domain> signed by the cluster CA, read again when it changes (required)")
	fs.StringVar(&c.keyFile, "key-file", "", "private key of --cert-file (required)")
	fs.StringVar(&c.upstream, "upstream", "127.0.0.1:"+strconv.Itoa(contract.APIServerPort), "`address` of the API server, reached over plain TCP")
	fs.StringVar(&c.healthListen, "health-listen", ":"+strconv.Itoa(contract.TunnelHealthPort), "`address` of /healthz (listening) and /readyz (the API server accepts connections)")
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	if c.certFile == "" || c.keyFile == "" {
		return nil, errors.New("--cert-file and --key-file are required")
	}
	return c, nil
}

func (c serverCommand) run(ctx context.Context, log *slog.Logger) error {
	s, err := tunnel.NewServer(c.certFile, c.keyFile, c.upstream, log)
	if err != nil {
		return err
	}
	log.Info("serving", "listen", c.listen, "upstream", c.upstream, "healthListen", c.healthListen)
	return tunnel.Run(ctx, s, c.listen, c.healthListen)
}

type nodeCommand struct {
	address                                netip.Addr
	port                                   uint16
	device, upstream, caFile, healthListen string
	direct                                 bool
}

// healthPort serves the node's /healthz and /readyz on its address.
var healthPort = strconv.Itoa(contract.NodeTunnelHealthPort)

func parseNode(args []string, out io.Writer) (command, error) {
	var c nodeCommand
	var port uint
	fs := flagSet("node", out)
	fs.TextVar(&c.address, "address", netip.MustParseAddr(contract.NodeLocalAddress), "node-local `address` that default/kubernetes points at, the same on every node")
	fs.UintVar(&port, "port", contract.NodeTunnelPort, "`port` to listen on at --address")
	fs.StringVar(&c.device, "device", contract.NodeTunnelDevice, "network device holding --address: created as a dummy device when missing (on lo instead where the kernel has no dummy driver), used as it is when present; left in place on exit")
	fs.StringVar(&c.upstream, "upstream", "", "kas-tunnel.<cluster>.<namespace>.<domain>:443, dialed by name through the node's resolver; the name is the outer SNI and what the sidecar's certificate must be valid for (required)")
	fs.BoolVar(&c.direct, "direct", false, "--upstream is the API server itself behind the tenant's own load balancer, which needs no SNI: forward connections as they are, without an outer TLS (readiness still checks the API server's certificate for the name)")
	fs.StringVar(&c.caFile, "ca-file", "/etc/kubernetes/pki/ca.crt", "the cluster CA the sidecar's certificate must be signed by, read again when it changes")
	fs.StringVar(&c.healthListen, "health-listen", "", "`address` of /healthz (listening) and /readyz (an outer TLS handshake with the sidecar succeeds) (default <address>:"+healthPort+")")
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	if port == 0 || port > 65535 {
		return nil, fmt.Errorf("--port %d: want 1 to 65535", port)
	}
	c.port = uint16(port)
	host, upstreamPort, err := net.SplitHostPort(c.upstream)
	switch {
	case c.upstream == "":
		return nil, errors.New("--upstream is required: kas-tunnel.<cluster>.<namespace>.<domain>:443")
	case err != nil:
		return nil, fmt.Errorf("--upstream: %w", err)
	case host == "" || upstreamPort == "":
		return nil, fmt.Errorf("--upstream %q: want host:port", c.upstream)
	case net.ParseIP(host) != nil:
		return nil, fmt.Errorf("--upstream %q: name the host, not its address: the name is the SNI the Gateway routes by", c.upstream)
	}
	if c.healthListen == "" {
		c.healthListen = net.JoinHostPort(c.address.String(), healthPort)
	}
	return c, nil
}

func (c nodeCommand) run(ctx context.Context, log *slog.Logger) error {
	device, err := tunnel.EnsureDevice(c.device, c.address)
	if err != nil {
		return err
	}
	if device != c.device {
		log.Warn("this kernel has no dummy network device driver: the address is on "+device+" instead", "device", c.device)
	}
	n, err := tunnel.NewNode(c.upstream, c.caFile, c.direct, log)
	if err != nil {
		return err
	}
	listen := netip.AddrPortFrom(c.address, c.port).String()
	log.Info("serving", "listen", listen, "device", device, "upstream", c.upstream, "healthListen", c.healthListen)
	return tunnel.Run(ctx, n, listen, c.healthListen)
}

type keysCommand struct {
	listen, discoveryFile, keysFile, certFile, keyFile string
}

func parseKeys(args []string, out io.Writer) (command, error) {
	var c keysCommand
	fs := flagSet("keys", out)
	fs.StringVar(&c.listen, "listen", "127.0.0.1:"+strconv.Itoa(contract.ManagementKeysPort), "`address` to serve on, loopback: only the API server beside it reads the keys here")
	fs.StringVar(&c.discoveryFile, "discovery-file", "", "discovery document served at /.well-known/openid-configuration, read at every request (required)")
	fs.StringVar(&c.keysFile, "keys-file", "", "JSON Web Key Set served at /openid/v1/jwks, read at every request (required)")
	fs.StringVar(&c.certFile, "cert-file", "", "serving certificate, valid for the --listen address, read again when it changes (required)")
	fs.StringVar(&c.keyFile, "key-file", "", "private key of --cert-file (required)")
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	if c.discoveryFile == "" || c.keysFile == "" || c.certFile == "" || c.keyFile == "" {
		return nil, errors.New("--discovery-file, --keys-file, --cert-file and --key-file are required")
	}
	return c, nil
}

func (c keysCommand) run(ctx context.Context, log *slog.Logger) error {
	k, err := tunnel.NewKeys(c.discoveryFile, c.keysFile, c.certFile, c.keyFile, log)
	if err != nil {
		return err
	}
	log.Info("serving", "listen", c.listen)
	return k.Run(ctx, c.listen)
}

type auditCommand struct {
	listen  string
	targets []string
	timeout time.Duration
}

func parseAudit(args []string, out io.Writer) (command, error) {
	var c auditCommand
	fs := flagSet("audit", out)
	fs.StringVar(&c.listen, "listen", "127.0.0.1:"+strconv.Itoa(contract.AuditForwarderPort), "`address` the API server posts its audit events to, loopback: only the API server beside it posts here")
	fs.Func("target", "kubeconfig `file` of a webhook target (server, CA, bearer token), read at start; once per target (required)", func(s string) error {
		c.targets = append(c.targets, s)
		return nil
	})
	fs.DurationVar(&c.timeout, "timeout", 30*time.Second, "how long a target may take to answer a post before the post counts as failed")
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	if len(c.targets) == 0 {
		return nil, errors.New("--target is required, once per webhook target")
	}
	if c.timeout <= 0 {
		return nil, fmt.Errorf("--timeout %s: want a positive duration", c.timeout)
	}
	return c, nil
}

func (c auditCommand) run(ctx context.Context, log *slog.Logger) error {
	f, err := tunnel.NewAuditForwarder(c.targets, c.timeout, log)
	if err != nil {
		return err
	}
	log.Info("serving", "listen", c.listen, "targets", len(c.targets))
	return f.Run(ctx, c.listen)
}

func flagSet(name string, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("tunnel "+name, flag.ContinueOnError)
	fs.SetOutput(out)
	return fs
}

func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return nil
}
