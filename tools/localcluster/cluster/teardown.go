package cluster

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Teardown removes everything the cluster in dir started or created, by the
// process ids, cgroups, mounts and interface it recorded: the kubelet, every
// container and containerd shim, containerd, the control plane processes,
// the mounts under dir and the loop devices of its volumes, the bridge,
// kube-proxy's rules (with kubeProxy's --cleanup, when given), kube-router's
// chains and ipsets, and the cgroups; and of every worker node (see StartWorker) its kubelet,
// containers, containerd, kubeadm, mount and network namespaces, veth pair
// and the host directories it had to create. It keeps dir's logs. It is
// safe to run when nothing is left.
func Teardown(dir, kubeProxy string) error {
	st, err := loadState(dir)
	if err != nil {
		return err
	}
	var errs []error
	// The kubelets first, so that they restart no container.
	for _, p := range st.Processes {
		if isKubelet(p.Name) {
			kill(dir, p.PID, 0)
		}
	}
	errs = append(errs, killCgroups(), killShims(dir))
	for _, p := range slices.Backward(st.Processes) {
		kill(dir, p.PID, 5*time.Second)
	}
	errs = append(errs, unmountUnder(dir))
	// The volumes' loop devices went with their mounts; any left (a mount
	// made lazily) go now.
	errs = append(errs, detachLoops(func(file string) bool { return strings.HasPrefix(file, dir+"/") }))
	for _, w := range st.Workers {
		errs = append(errs, w.remove())
	}
	if err := exec.Command("ip", "link", "show", bridgeName).Run(); err == nil {
		if out, err := exec.Command("ip", "link", "delete", bridgeName).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("delete bridge %s: %w: %s", bridgeName, err, out))
		}
	}
	if kubeProxy != "" && len(st.Processes) > 0 {
		if out, err := exec.Command(kubeProxy, "--cleanup").CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("kube-proxy --cleanup: %w: %s", err, out))
		}
	}
	if len(st.Processes) > 0 {
		errs = append(errs, removeKubeRouterRules())
	}
	errs = append(errs, removeCgroups())
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	for _, e := range entries {
		if e.Name() != "logs" {
			errs = append(errs, os.RemoveAll(filepath.Join(dir, e.Name())))
		}
	}
	return errors.Join(errs...)
}

// kill ends pid if it is still one of dir's processes (its command line
// names dir, so a reused pid is left alone): SIGTERM, then SIGKILL after
// grace.
func kill(dir string, pid int, grace time.Duration) {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !strings.Contains(string(cmdline), dir) {
		return
	}
	sig := syscall.SIGTERM
	if grace == 0 {
		sig = syscall.SIGKILL
	}
	_ = syscall.Kill(pid, sig)
	for deadline := time.Now().Add(grace); alive(pid) && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	if alive(pid) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	for deadline := time.Now().Add(5 * time.Second); alive(pid) && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
}

// cgroupHierarchies are the cgroup v1 controllers pods get cgroups in.
func cgroupHierarchies() []string {
	var out []string
	entries, _ := os.ReadDir("/sys/fs/cgroup")
	for _, e := range entries {
		if e.IsDir() && e.Name() != "unified" {
			out = append(out, filepath.Join("/sys/fs/cgroup", e.Name()))
		}
	}
	return out
}

// killCgroups kills every process in a pod cgroup until none is left.
func killCgroups() error { return killCgroupsUnder(cgroupParent) }

// killCgroupsUnder kills every process in the cgroup rel and those below
// it, in every hierarchy, until none is left.
func killCgroupsUnder(rel string) error {
	for range 50 {
		pids := map[int]bool{}
		for _, h := range cgroupHierarchies() {
			_ = filepath.WalkDir(filepath.Join(h, rel), func(path string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
					return nil //nolint:nilerr // a cgroup that vanished has no processes left
				}
				b, _ := os.ReadFile(path)
				for _, f := range strings.Fields(string(b)) {
					if pid, err := strconv.Atoi(f); err == nil {
						pids[pid] = true
					}
				}
				return nil
			})
		}
		if len(pids) == 0 {
			return nil
		}
		for pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("processes in the cgroups under %s survived SIGKILL", rel)
}

// killShims ends the containerd shims of the containerds under dir, which
// outlive them.
func killShims(dir string) error {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return err
	}
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmdline), "containerd-shim") && strings.Contains(string(cmdline), dir) {
			kill(dir, pid, 0)
		}
	}
	return nil
}

// unmountUnder detaches every mount below dir, deepest first.
func unmountUnder(dir string) error {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	var points []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) > 4 && strings.HasPrefix(unescapeMount(fields[4]), dir+"/") {
			points = append(points, unescapeMount(fields[4]))
		}
	}
	slices.SortFunc(points, func(a, b string) int { return len(b) - len(a) })
	var errs []error
	for _, p := range points {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// unescapeMount undoes mountinfo's octal escapes of spaces and the like.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// removeCgroups removes the pod cgroups, children first.
func removeCgroups() error { return removeCgroupsUnder(cgroupParent) }

// removeCgroupsUnder removes the cgroup rel and those below it, children
// first, in every hierarchy.
func removeCgroupsUnder(rel string) error {
	var errs []error
	for _, h := range cgroupHierarchies() {
		var dirs []string
		_ = filepath.WalkDir(filepath.Join(h, rel), func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		for _, d := range slices.Backward(dirs) {
			if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}

// kubeRouterChains are the prefixes of the filter table chains kube-router's
// network policy controller makes; the built-in chains jump to the first.
var kubeRouterChains = []string{"KUBE-ROUTER-", "KUBE-NWPLCY-", "KUBE-POD-FW-"}

// removeKubeRouterRules removes kube-router's chains, and the jumps to them,
// from both filter tables, then its ipsets, which the rules held. Its own
// --cleanup-config does not (v2.1.0 cleans up nothing of the firewall when
// run alone), and left behind they would filter the next cluster's pods,
// whose addresses repeat, before its kube-router starts.
func removeKubeRouterRules() error {
	var errs []error
	for _, family := range []string{"iptables", "ip6tables"} {
		out, err := exec.Command(family+"-save", "-t", "filter").Output()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s-save: %w", family, err))
			continue
		}
		ours := func(chain string) bool {
			return slices.ContainsFunc(kubeRouterChains, func(p string) bool { return strings.HasPrefix(chain, p) })
		}
		var jumps, chains []string
		for _, line := range strings.Split(string(out), "\n") {
			fields := strings.Fields(line)
			switch {
			case len(fields) > 0 && strings.HasPrefix(fields[0], ":") && ours(fields[0][1:]):
				chains = append(chains, fields[0][1:])
			case len(fields) > 1 && fields[0] == "-A" && !ours(fields[1]) && ours(fields[len(fields)-1]):
				jumps = append(jumps, "-D"+strings.TrimPrefix(line, "-A"))
			}
		}
		if len(chains) == 0 {
			continue
		}
		script := append([]string{"*filter"}, jumps...)
		for _, c := range chains {
			script = append(script, "-F "+c)
		}
		for _, c := range chains {
			script = append(script, "-X "+c)
		}
		restore := exec.Command(family+"-restore", "--noflush")
		restore.Stdin = strings.NewReader(strings.Join(append(script, "COMMIT", ""), "\n"))
		if out, err := restore.CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("%s-restore: %w: %s", family, err, out))
		}
	}
	if _, err := exec.LookPath("ipset"); err != nil {
		return errors.Join(errs...)
	}
	out, err := exec.Command("ipset", "list", "-n").Output()
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("ipset list: %w", err))...)
	}
	for _, set := range strings.Fields(string(out)) {
		if strings.Contains(set, "KUBE-") || strings.HasPrefix(set, "kube-router") {
			if out, err := exec.Command("ipset", "destroy", set).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("ipset destroy %s: %w: %s", set, err, out))
			}
		}
	}
	return errors.Join(errs...)
}
