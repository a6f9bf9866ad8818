package envtest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Build compiles the main package pkg (such as ./cmd/controller) of the
// repository into dir, with more go build flags, and returns the binary's
// path.
func Build(root, pkg, dir string, flags ...string) (string, error) {
	out := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command("go", append(append([]string{"build"}, flags...), "-o", out, pkg)...)
	cmd.Dir = root
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, msg)
	}
	return out, nil
}

// handedOut are the ports FreePort returned.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// FreePort returns a TCP port on 127.0.0.1 that nothing listens on now and
// that it never returned before: tests run side by side, and the kernel
// may hand a port just closed to the next that asks, so two tests could
// otherwise be given the same port and one of them reach the other's
// server.
func FreePort() (int, error) {
	handedOut.Lock()
	defer handedOut.Unlock()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if !handedOut.ports[port] {
			handedOut.ports[port] = true
			return port, nil
		}
	}
}

// Process is one of the provider's binaries, running.
type Process struct {
	// MetricsURL serves the process's Prometheus metrics, when it has any,
	// to those allowed to read them (see Scrape).
	MetricsURL string
	// ProfilerURL serves the process's pprof profiles, when it serves them.
	ProfilerURL string

	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
	err  error
}

// Write collects the process's output.
func (p *Process) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

// Output is what the process printed so far; nothing for a process that
// was never started.
func (p *Process) Output() string {
	if p == nil {
		return ""
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// StartProcess runs bin with args and the extra environment variables env.
func StartProcess(bin string, env []string, args ...string) (*Process, error) {
	p := &Process{cmd: exec.Command(bin, args...), done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p, p
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// WaitReady polls url until it answers 200 OK, the process exits, or the
// timeout passes.
func (p *Process) WaitReady(url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			return fmt.Errorf("exited before %s answered (%w):\n%s", url, p.err, p.Output())
		default:
		}
		if resp, err := http.Get(url); err == nil { //nolint:gosec,noctx // a local test URL
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s did not answer 200 within %s:\n%s", url, timeout, p.Output())
}

// WaitListening waits until something accepts connections at addr, such as
// the metrics server, which listens only once it made its certificate.
func (p *Process) WaitListening(addr string, timeout time.Duration) error {
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if exited, err := p.Exited(); exited {
			return fmt.Errorf("exited before listening on %s (%w):\n%s", addr, err, p.Output())
		}
		if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			return conn.Close()
		}
	}
	return fmt.Errorf("nothing listens on %s after %s:\n%s", addr, timeout, p.Output())
}

// Stop sends SIGTERM and waits for the exit; it returns the exit error, or
// an error after killing a process that did not stop within timeout.
func (p *Process) Stop(timeout time.Duration) error {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("did not stop within %s after SIGTERM:\n%s", timeout, p.Output())
	}
}

// Kill kills the process at once, as a crash would, and waits for it.
func (p *Process) Kill() error {
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	<-p.done
	return nil
}

// Exited reports whether the process has ended, and how.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// PID is the process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// HeapMiB is the process's live heap in MiB right after two garbage
// collections (HeapAlloc), read from its heap profile at ProfilerURL: what
// a sync.Pool holds (such as the compressor of the last metrics scrape,
// about 0.9 MiB) outlives one collection and is freed at the next. Under
// GODEBUG=memprofilerate=4096 in the environment the process starts with,
// the profile samples finer than Go's 512 KiB.
func (p *Process) HeapMiB(ctx context.Context) (float64, error) {
	if _, err := p.profile(ctx, "/heap?gc=1&debug=1"); err != nil {
		return 0, err
	}
	text, err := p.profile(ctx, "/heap?gc=1&debug=1")
	if err != nil {
		return 0, err
	}
	m := heapAlloc.FindStringSubmatch(text)
	if m == nil {
		return 0, errors.New("the heap profile tells no HeapAlloc")
	}
	alloc, err := strconv.ParseFloat(m[1], 64)
	return alloc / (1 << 20), err
}

var heapAlloc = regexp.MustCompile(`(?m)^# HeapAlloc = (\d+)$`)

// SaveHeapProfile writes the process's heap profile to file, for
// go tool pprof.
func (p *Process) SaveHeapProfile(ctx context.Context, file string) error {
	profile, err := p.profile(ctx, "/heap")
	if err != nil {
		return err
	}
	return os.WriteFile(file, []byte(profile), 0o600)
}

// profile reads one of the process's pprof endpoints, path under
// ProfilerURL.
func (p *Process) profile(ctx context.Context, path string) (string, error) {
	code, body, err := Scrape(ctx, p.ProfilerURL+path, "")
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("%s: HTTP %d", path, code)
	}
	return body, err
}

// RSSMiB is the process's resident memory in MiB, from /proc.
func (p *Process) RSSMiB() (float64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", p.PID()))
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if fields := strings.Fields(s.Text()); len(fields) == 3 && fields[0] == "VmRSS:" {
			kib, err := strconv.ParseFloat(fields[1], 64)
			return kib / 1024, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status: %w", p.PID(), s.Err())
}
