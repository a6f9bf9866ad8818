package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Worker nodes join hosted clusters the way a machine of an infrastructure
// provider does, with `kubeadm join`, but on this machine: each in a network
// namespace of its own, linked to the host by a veth pair on a /30 of
// WorkerCIDR and routed through the host (which reaches LoadBalancer
// addresses through kube-proxy), and in a mount namespace of its own, where
// per-worker directories are bind-mounted over the paths kubeadm and the
// kubelet use (/etc/kubernetes, /var/lib/kubelet, /etc/cni/net.d, ...).
const (
	// WorkerCIDR holds the links between the host and the workers.
	WorkerCIDR = "10.252.0.0/24"
	// workerBridge is the pod bridge inside each worker's network namespace.
	workerBridge = "cni0"
	// workerNetnsPrefix names a worker's network namespace, followed by the
	// worker's name.
	workerNetnsPrefix = "hcpw-"
)

// WorkerConfig says what a worker joins and with what.
type WorkerConfig struct {
	// Name is the node's name (a DNS label); it also names the network
	// namespace (hcpw-<Name>) and the worker's directory and cgroup.
	Name string
	// Index picks the worker's link: the Index-th /30 of WorkerCIDR (0 to
	// 63). Workers running at the same time need different indexes.
	Index int
	// Kubeadm and Kubelet are the binaries (bin/kube/<version>/...).
	Kubeadm, Kubelet string
	// Endpoint is the hosted API server, host:port, as workers reach it.
	Endpoint string
	// Token is a bootstrap token, <id>.<secret> (see NewBootstrapToken).
	Token string
	// CACertHash pins the cluster CA: sha256:<hex> (see CACertHash).
	CACertHash string
	// PodCIDR is the worker's share of the cluster's pod network, such as
	// 192.168.1.0/24; its first address is the pod bridge's.
	PodCIDR string
	// Tarballs are OCI image tarballs imported into the worker's containerd
	// before it joins: everything its pods run (pause, kube-proxy, CoreDNS,
	// the konnectivity agent, test images). Nothing is ever pulled.
	Tarballs []string
}

// Worker is a running worker node.
type Worker struct {
	c   *Cluster
	cfg WorkerConfig
	// NodeIP is the worker's address, its node's InternalIP.
	NodeIP string
	// Dir holds the worker's state; its logs are in LogDir.
	Dir string

	hostIP string
	rec    workerRecord
}

// workerRecord is what teardown removes of a worker outside the cluster's
// directory, recorded before it is made.
type workerRecord struct {
	Name     string `json:"name"`
	Netns    string `json:"netns"`
	HostVeth string `json:"hostVeth"`
	// CreatedDirs are host directories that did not exist and had to be
	// made as bind-mount targets (such as /etc/kubernetes), outermost
	// first; teardown removes them again when empty.
	CreatedDirs []string `json:"createdDirs,omitempty"`
}

// bindTargets are the host paths each worker sees its own directory at,
// with that directory relative to the worker's: where kubeadm and the
// kubelet write, where the kubelet's device plugins, containerd's runc and
// shims, the CNI plugins' caches and the pod logs live.
var bindTargets = []struct{ target, own string }{
	{"/etc/kubernetes", "etc-kubernetes"},
	{"/var/lib/kubelet", "kubelet"},
	{"/etc/cni/net.d", "cni/net.d"},
	{"/var/lib/cni", "cni/lib"},
	{"/run/containerd", "run-containerd"},
	{"/var/log/pods", "log/pods"},
	{"/var/log/containers", "log/containers"},
}

// StartWorker starts a worker and has it join the hosted cluster with
// `kubeadm join`: it links a network namespace to the host, makes a mount
// namespace with the worker's own directories, starts containerd there and
// imports the images, runs kubeadm join and, once kubeadm has written the
// kubelet's configuration (there is no systemd to start it), the kubelet
// with kubeadm's flags, waits for kubeadm to finish (the kubelet's TLS
// bootstrap). The node has no network for pods yet, and is not Ready, until
// ConfigureCNI. On failure it removes what it started; the cluster's
// Teardown removes everything too.
func (c *Cluster) StartWorker(ctx context.Context, cfg WorkerConfig) (_ *Worker, err error) {
	w, err := c.newWorker(cfg)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, w.Stop())
		}
	}()
	if err := c.runSteps(ctx, "worker "+cfg.Name+": ", []step{
		{"directories", w.makeDirs},
		{"cgroup", func(context.Context) error { return makeCgroup(w.cgroup()) }},
		{"network", w.setUpNetwork},
		{"mount namespace", w.makeMountNamespace},
		{"containerd", w.startContainerd},
		{"images", w.importImages},
		{"kubeadm join and kubelet", w.join},
	}); err != nil {
		return nil, err
	}
	return w, nil
}

func (c *Cluster) newWorker(cfg WorkerConfig) (*Worker, error) {
	if cfg.Name == "" || strings.ContainsAny(cfg.Name, "/ .") {
		return nil, fmt.Errorf("worker name %q: want a DNS label", cfg.Name)
	}
	if cfg.Kubeadm == "" || cfg.Kubelet == "" || cfg.Endpoint == "" || cfg.Token == "" || cfg.CACertHash == "" {
		return nil, fmt.Errorf("worker %s: Kubeadm, Kubelet, Endpoint, Token and CACertHash are all required", cfg.Name)
	}
	if _, err := netip.ParsePrefix(cfg.PodCIDR); err != nil {
		return nil, fmt.Errorf("worker %s: pod CIDR: %w", cfg.Name, err)
	}
	c.st.mu.Lock()
	running := slices.ContainsFunc(c.st.Workers, func(r workerRecord) bool { return r.Name == cfg.Name })
	c.st.mu.Unlock()
	if running {
		return nil, fmt.Errorf("worker %s already runs", cfg.Name)
	}
	link := netip.MustParsePrefix(WorkerCIDR)
	if cfg.Index < 0 || cfg.Index >= 1<<(32-link.Bits()-2) {
		return nil, fmt.Errorf("worker %s: index %d: want 0 to %d", cfg.Name, cfg.Index, 1<<(32-link.Bits()-2)-1)
	}
	base := link.Addr().As4()
	base[3] += byte(4 * cfg.Index)
	host := netip.AddrFrom4(base).Next()
	w := &Worker{
		c: c, cfg: cfg, Dir: c.layout.path("workers", cfg.Name),
		hostIP: host.String(), NodeIP: host.Next().String(),
		// Interface names have at most 15 characters: the index, not the
		// name, tells the host side apart.
		rec: workerRecord{Name: cfg.Name, Netns: workerNetnsPrefix + cfg.Name, HostVeth: fmt.Sprintf("hcpw%d", cfg.Index)},
	}
	return w, nil
}

// path is a path under the worker's directory.
func (w *Worker) path(parts ...string) string {
	return filepath.Join(append([]string{w.Dir}, parts...)...)
}

func (w *Worker) socket() string    { return w.path("containerd", "containerd.sock") }
func (w *Worker) mountNS() string   { return w.path("ns", "mnt") }
func (w *Worker) netnsFile() string { return "/run/netns/" + w.rec.Netns }

// cgroup holds the worker's pods, below the cluster's pod cgroup, so that
// teardown finds them.
func (w *Worker) cgroup() string { return filepath.Join(cgroupParent, w.cfg.Name) }

// procName is how the worker's process called name is recorded and logged
// (logs/workers/<worker>/<name>.log).
func (w *Worker) procName(name string) string { return "workers/" + w.cfg.Name + "/" + name }

// LogDir holds the worker's logs: containerd, kubeadm, kubelet.
func (w *Worker) LogDir() string { return w.c.layout.path("logs", "workers", w.cfg.Name) }

// saveRecord records (or updates) the worker for teardown, keeping the
// directories another worker's Stop handed its record.
func (w *Worker) saveRecord() error {
	st := w.c.st
	return st.update(func() {
		rec := w.rec
		rec.CreatedDirs = slices.Clone(rec.CreatedDirs)
		if i := slices.IndexFunc(st.Workers, func(r workerRecord) bool { return r.Name == w.rec.Name }); i >= 0 {
			for _, d := range st.Workers[i].CreatedDirs {
				if !slices.Contains(rec.CreatedDirs, d) {
					rec.CreatedDirs = append(rec.CreatedDirs, d)
				}
			}
			st.Workers = slices.Delete(st.Workers, i, i+1)
		}
		st.Workers = append(st.Workers, rec)
	})
}

func (w *Worker) makeDirs(context.Context) error {
	if err := w.saveRecord(); err != nil {
		return err
	}
	for _, d := range []string{
		"containerd", "ns", "patches", "path", "etc-kubernetes", "kubelet", "cni/net.d",
		"cni/lib", "cni/ipam", "run-containerd", "log/pods", "log/containers",
	} {
		if err := os.MkdirAll(w.path(d), 0o700); err != nil {
			return err
		}
	}
	// Bind mounts need their targets on the host; make the missing ones,
	// recorded first so that teardown removes them.
	for _, b := range bindTargets {
		created, err := missingDirs(b.target)
		if err != nil {
			return err
		}
		if len(created) == 0 {
			continue
		}
		w.rec.CreatedDirs = append(w.rec.CreatedDirs, created...)
		if err := w.saveRecord(); err != nil {
			return err
		}
		if err := os.MkdirAll(b.target, 0o755); err != nil {
			return err
		}
	}
	return nil
}

// missingDirs are dir and its ancestors that do not exist, outermost first.
func missingDirs(dir string) ([]string, error) {
	var out []string
	for d := filepath.Clean(dir); d != "/"; d = filepath.Dir(d) {
		_, err := os.Stat(d)
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		out = append([]string{d}, out...)
	}
	return out, nil
}

// setUpNetwork makes the worker's network namespace with a veth pair to the
// host: the worker's address on its side, a default route via the host (so
// that it reaches LoadBalancer addresses, which the host routes to the
// management cluster's kube-proxy), and a host route to the worker's pods,
// which the hosted API servers' replies and the host's reverse-path checks
// need. Forwarding and the bridge's netfilter hook are on inside the
// namespace: the worker's kube-proxy relies on both for Service traffic
// between pods on its bridge. Like a machine behind NAT, the worker accepts
// no connection from outside (its own connections' replies pass): what the
// hosted API server reaches on it, the kubelet for logs and exec, it can
// reach only through the konnectivity agent's tunnel.
func (w *Worker) setUpNetwork(context.Context) error {
	ns, veth := w.rec.Netns, w.rec.HostVeth
	for _, args := range [][]string{
		{"netns", "add", ns},
		{"link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns},
		{"addr", "add", w.hostIP + "/30", "dev", veth},
		{"link", "set", veth, "up"},
		{"-n", ns, "link", "set", "lo", "up"},
		{"-n", ns, "addr", "add", w.NodeIP + "/30", "dev", "eth0"},
		{"-n", ns, "link", "set", "eth0", "up"},
		{"-n", ns, "route", "add", "default", "via", w.hostIP},
		{"route", "add", w.cfg.PodCIDR, "via", w.NodeIP, "dev", veth},
	} {
		if err := ip(args...); err != nil {
			return err
		}
	}
	for _, key := range []string{"net/ipv4/ip_forward", "net/bridge/bridge-nf-call-iptables", "net/bridge/bridge-nf-call-ip6tables"} {
		// /proc/sys/net belongs to the network namespace of the process
		// that writes it.
		if err := runIn(ns, "sh", "-c", `echo 1 > "$0"`, "/proc/sys/"+key); err != nil {
			return err
		}
	}
	for _, chain := range []string{"INPUT", "FORWARD"} {
		if err := runIn(ns, "iptables", "-A", chain, "-i", "eth0", "-m", "conntrack", "--ctstate", "NEW", "-j", "DROP"); err != nil {
			return err
		}
	}
	return nil
}

// AcceptFrom has the worker accept connections from sources (CIDR
// prefixes), such as another worker's address and pod network, as nodes of
// one cluster on one network reach each other's pods and host ports (the
// conformance suite checks both). Connections from anywhere else, the
// management cluster included, stay refused.
func (w *Worker) AcceptFrom(sources ...string) error {
	for _, s := range sources {
		if _, err := netip.ParsePrefix(s); err != nil {
			return fmt.Errorf("worker %s: accept from %q: %w", w.cfg.Name, s, err)
		}
		// Inserted ahead of the rules that drop new connections.
		for _, chain := range []string{"INPUT", "FORWARD"} {
			if err := runIn(w.rec.Netns, "iptables", "-I", chain, "1", "-i", "eth0", "-s", s, "-j", "ACCEPT"); err != nil {
				return err
			}
		}
	}
	return nil
}

// runIn runs a command in the network namespace ns.
func runIn(ns string, args ...string) error {
	return ip(append([]string{"netns", "exec", ns}, args...)...)
}

// makeMountNamespace makes the worker's mount namespace, persisted in a file
// under the worker's directory (on a private bind mount of its own, as
// unshare requires), so that containerd, kubeadm and the kubelet all enter
// the same one: the kubelet's volume mounts must be the ones containerd
// hands to containers. In it, the worker's directories are bind-mounted
// over bindTargets, its resolv.conf over /etc/resolv.conf, and the copies
// of the host's mounts under the cluster's directory and of /run/netns are
// dropped so that the worker pins none of the management cluster's
// containers and network namespaces. Everything mounted inside stays there
// (private propagation) and vanishes with the namespace when its last
// process ends and the file is unmounted.
func (w *Worker) makeMountNamespace(context.Context) error {
	// A machine's resolver names the DNS its network provides: here the
	// one that publishes the Gateway's wildcard domain, so that kubeadm,
	// the kubelet and pods with dnsPolicy Default (the konnectivity agent,
	// CoreDNS's upstream) resolve the gateway hostnames as in production.
	resolvConf := w.path("resolv.conf")
	if err := os.WriteFile(resolvConf, []byte(workerResolvConf), 0o644); err != nil {
		return err
	}
	dir := w.path("ns")
	if err := syscall.Mount(dir, dir, "", syscall.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s: %w", dir, err)
	}
	if err := syscall.Mount("", dir, "", syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make %s private: %w", dir, err)
	}
	if err := os.WriteFile(w.mountNS(), nil, 0o600); err != nil {
		return err
	}
	script := []string{
		"set -eu",
		fmt.Sprintf(`awk -v d=%s '{ if (index($5, d) == 1 || index($5, "/run/netns/") == 1) print $5 }' /proc/self/mountinfo |`,
			shellQuote(w.c.cfg.Dir+"/")) + ` sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done`,
	}
	for _, b := range bindTargets {
		script = append(script, fmt.Sprintf("mount --bind %s %s", shellQuote(w.path(b.own)), shellQuote(b.target)))
	}
	script = append(script, fmt.Sprintf("mount --bind %s /etc/resolv.conf", shellQuote(resolvConf)))
	out, err := runOutput("unshare", "--mount="+w.mountNS(), "--propagation", "private", "--", "sh", "-c", strings.Join(script, "\n"))
	if err != nil {
		return fmt.Errorf("unshare: %w: %s", err, out)
	}
	return nil
}

// workerResolvConf is every worker's /etc/resolv.conf.
const workerResolvConf = "# The DNS server of the network the workers are on: it serves the\n" +
	"# Gateway's wildcard domain " + GatewayDomain + " and nothing else.\n" +
	"nameserver " + DNSAddress + "\n"

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func runOutput(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	return string(out), err
}

// inWorker is the command line that runs bin with args in the worker's
// network and mount namespaces. nsenter opens both before entering either,
// and execs bin without forking, so the recorded process id is bin's.
func (w *Worker) inWorker(bin string, args ...string) []string {
	return append([]string{"--mount=" + w.mountNS(), "--net=" + w.netnsFile(), "--", bin}, args...)
}

// startIn starts bin in the worker's namespaces, recorded as the worker's
// process name.
func (w *Worker) startIn(name string, env []string, bin string, args ...string) (<-chan error, error) {
	return w.c.startEnv(w.procName(name), env, "nsenter", w.inWorker(bin, args...)...)
}

// startContainerd runs the worker's own containerd, configured as the
// cluster's, with its root, state and socket in the worker's directory and
// CNI configurations read from the worker's cni/net.d.
func (w *Worker) startContainerd(ctx context.Context) error {
	config := w.path("containerd", "config.toml")
	text := containerdConfig(w.path("containerd"), w.socket(), w.c.cfg.Images.Pause, w.path("cni", "net.d"))
	if err := os.WriteFile(config, []byte(text), 0o600); err != nil {
		return err
	}
	if _, err := w.startIn("containerd", nil, "containerd", "--config", config); err != nil {
		return err
	}
	return w.c.poll(ctx, w.procName("containerd"), time.Minute, func(ctx context.Context) error {
		_, err := ctrAt(ctx, w.socket(), "version")
		return err
	})
}

// importImages loads the worker's images through its containerd's socket,
// which the host reaches at the same path.
func (w *Worker) importImages(ctx context.Context) error {
	return importTarballs(ctx, w.socket(), w.cfg.Tarballs)
}

// kubeletPatch is the kubeadm patch (target kubeletconfiguration, strategic
// merge; kubeadm v1.36 knows it, see cmd/kubeadm/app/util/patches) that
// adapts the cluster's kubelet-config to this machine and to the worker's
// cgroup and containerd.
func (w *Worker) kubeletPatch() string { return machineKubeletConfig(w.cgroup(), w.socket()) }

// join runs kubeadm join in the background. kubeadm writes the kubelet's
// configuration, flags and bootstrap kubeconfig, then would have systemd
// start the kubelet and waits for its TLS bootstrap; there is no systemd
// (and kubeadm runs with a PATH without systemctl, so that it never touches
// a kubelet service of the host), so once those files exist the kubelet is
// started here, with kubeadm's flags, and kubeadm must then finish.
func (w *Worker) join(ctx context.Context) error {
	patch := w.path("patches", "kubeletconfiguration+strategic.yaml")
	if err := os.WriteFile(patch, []byte(w.kubeletPatch()), 0o600); err != nil {
		return err
	}
	joined, err := w.startIn("kubeadm", []string{"PATH=" + w.path("path")}, w.cfg.Kubeadm, "join", w.cfg.Endpoint,
		"--token", w.cfg.Token, "--discovery-token-ca-cert-hash", w.cfg.CACertHash,
		"--node-name", w.cfg.Name, "--cri-socket", "unix://"+w.socket(),
		"--ignore-preflight-errors=all", "--patches", w.path("patches"), "--v=1")
	if err != nil {
		return err
	}
	files := []string{
		w.path("kubelet", "config.yaml"),
		w.path("etc-kubernetes", "bootstrap-kubelet.conf"),
		// Written last before kubeadm would start the kubelet.
		w.path("kubelet", "kubeadm-flags.env"),
	}
	if err := w.c.poll(ctx, w.procName("kubeadm"), 5*time.Minute, func(context.Context) error {
		for _, f := range files {
			if _, err := os.Stat(f); err != nil {
				return fmt.Errorf("kubeadm join has not written %s yet", f)
			}
		}
		return nil
	}); err != nil {
		return err
	}
	if err := w.startKubelet(); err != nil {
		return err
	}
	// Waited for while the kubelet runs: a kubelet that dies would only
	// show as kubeadm's timeout minutes later.
	var joinErr error
	err = w.c.poll(ctx, w.procName("kubelet"), 10*time.Minute, func(context.Context) error {
		select {
		case joinErr = <-joined:
			return nil
		default:
			return errors.New("kubeadm join has not finished")
		}
	})
	if err = errors.Join(err, joinErr); err != nil {
		return fmt.Errorf("kubeadm join: %w; its log ends with:\n%s", err, w.c.logTail(w.procName("kubeadm")))
	}
	return nil
}

// startKubelet runs the kubelet as kubeadm's systemd drop-in would, with the
// flags kubeadm wrote, plus the worker's address and its own root directory
// (the directory bind-mounted at /var/lib/kubelet, named by its real path so
// that teardown recognizes the process as the cluster's).
func (w *Worker) startKubelet() error {
	flags, err := kubeadmFlags(w.path("kubelet", "kubeadm-flags.env"))
	if err != nil {
		return err
	}
	args := append([]string{
		"--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf",
		"--kubeconfig=/etc/kubernetes/kubelet.conf",
		"--config=/var/lib/kubelet/config.yaml",
	}, flags...)
	args = append(args, "--root-dir="+w.path("kubelet"), "--node-ip="+w.NodeIP, "--v=1")
	_, err = w.startIn("kubelet", nil, w.cfg.Kubelet, args...)
	return err
}

// kubeadmFlags reads the flags kubeadm writes for the kubelet, a line
// KUBELET_KUBEADM_ARGS="<flags>" with the value quoted as Go quotes it.
func kubeadmFlags(file string) ([]string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		value, ok := strings.CutPrefix(strings.TrimSpace(line), "KUBELET_KUBEADM_ARGS=")
		if !ok {
			continue
		}
		if unquoted, err := strconv.Unquote(value); err == nil {
			value = unquoted
		}
		return strings.Fields(value), nil
	}
	return nil, fmt.Errorf("%s: no KUBELET_KUBEADM_ARGS", file)
}

// ConfigureCNI attaches the worker's pods to a bridge of their own in the
// worker's network namespace, with addresses from the worker's pod CIDR
// and without masquerading (the host routes the pod CIDR to the worker),
// as a CNI plugin's installer would. containerd notices the file and the
// kubelet then reports the node Ready.
func (w *Worker) ConfigureCNI() error {
	prefix := netip.MustParsePrefix(w.cfg.PodCIDR).Masked()
	conf := fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "hcp-worker",
  "plugins": [
    {
      "type": "bridge",
      "bridge": %q,
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {"type": "host-local", "dataDir": %q, "ranges": [[{"subnet": %q, "gateway": %q}]], "routes": [{"dst": "0.0.0.0/0"}]}
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, workerBridge, w.path("cni", "ipam"), prefix.String(), prefix.Addr().Next().String())
	// Written aside and renamed: containerd must never read half a file.
	tmp := w.path("cni", "net.d", ".10-worker.conflist")
	if err := os.WriteFile(tmp, []byte(conf), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, w.path("cni", "net.d", "10-worker.conflist"))
}

// Stop removes the worker: its kubelet, its pods' processes, the
// containerd shims, containerd and kubeadm (by process id), its mounts,
// network namespace, veth pair, cgroups and directory. Its logs stay.
func (w *Worker) Stop() error {
	st := w.c.st
	prefix := w.procName("")
	mine := st.processes(func(p proc) bool { return strings.HasPrefix(p.Name, prefix) })
	for _, p := range mine {
		if isKubelet(p.Name) {
			kill(w.Dir, p.PID, 0)
		}
	}
	errs := []error{killCgroupsUnder(w.cgroup()), killShims(w.Dir)}
	for _, p := range slices.Backward(mine) {
		kill(w.Dir, p.PID, 5*time.Second)
	}
	errs = append(errs, unmountUnder(w.Dir))
	// Under the state's lock, so that a worker that starts or stops beside
	// this one neither loses its processes from the state (and so escapes
	// teardown) nor gets the directories handed over while it removes its
	// own.
	errs = append(errs, st.update(func() {
		st.Processes = slices.DeleteFunc(st.Processes, func(p proc) bool { return strings.HasPrefix(p.Name, prefix) })
		rec := w.rec
		if i := slices.IndexFunc(st.Workers, func(r workerRecord) bool { return r.Name == w.rec.Name }); i >= 0 {
			rec = st.Workers[i]
			st.Workers = slices.Delete(st.Workers, i, i+1)
		}
		if len(st.Workers) > 0 {
			// Another worker still has its mounts on the directories this
			// one created; removing them would unmount those. The last one
			// removes them.
			st.Workers[0].CreatedDirs = append(st.Workers[0].CreatedDirs, rec.CreatedDirs...)
			rec.CreatedDirs = nil
		}
		errs = append(errs, rec.remove())
	}))
	errs = append(errs, removeCgroupsUnder(w.cgroup()), os.RemoveAll(w.Dir))
	return errors.Join(errs...)
}

// remove deletes what a worker made outside the cluster's directory: its
// network namespace (and with it the worker's end of the veth pair), the
// host's end with its routes, and the directories it created, if empty.
func (r workerRecord) remove() error {
	var errs []error
	if _, err := os.Stat("/run/netns/" + r.Netns); err == nil {
		errs = append(errs, ip("netns", "delete", r.Netns))
	}
	// The kernel removes the host's end of the veth by itself once the
	// worker's network namespace is gone, a moment after its last process
	// or its delete: only a veth still there after a failed delete is left.
	linkExists := func() bool { return exec.Command("ip", "link", "show", r.HostVeth).Run() == nil }
	if linkExists() {
		if err := ip("link", "delete", r.HostVeth); err != nil && linkExists() {
			errs = append(errs, err)
		}
	}
	for _, d := range slices.Backward(r.CreatedDirs) {
		if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) && !errors.Is(err, syscall.ENOTEMPTY) {
			errs = append(errs, fmt.Errorf("remove %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

// isKubelet tells the cluster's kubelet and the workers' apart from other
// processes: teardown ends them first, so that they restart no container.
func isKubelet(name string) bool { return name == "kubelet" || strings.HasSuffix(name, "/kubelet") }
