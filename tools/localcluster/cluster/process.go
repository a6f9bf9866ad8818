package cluster

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// state is what a cluster records in its directory so that another process
// can tear it down: the supervising process and every process it started.
type state struct {
	// mu guards what follows against the tests that start and stop
	// workers beside each other: update and processes take it.
	mu  sync.Mutex
	Dir string `json:"dir"`
	// Supervisor is the process that started the cluster and runs its loops.
	Supervisor int    `json:"supervisor"`
	Processes  []proc `json:"processes"`
	// Workers are the worker nodes started beside the cluster, with what
	// teardown must remove outside dir.
	Workers []workerRecord `json:"workers,omitempty"`
}

type proc struct {
	Name string `json:"name"`
	PID  int    `json:"pid"`
}

// update changes the state under its lock and saves it.
func (s *state) update(change func()) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	change()
	return s.save()
}

// processes are the recorded processes that match.
func (s *state) processes(match func(proc) bool) []proc {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.DeleteFunc(slices.Clone(s.Processes), func(p proc) bool { return !match(p) })
}

func stateFile(dir string) string { return filepath.Join(dir, "state.json") }

func (s *state) save() error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(stateFile(s.Dir), b, 0o600)
}

func loadState(dir string) (*state, error) {
	b, err := os.ReadFile(stateFile(dir))
	if errors.Is(err, os.ErrNotExist) {
		return &state{Dir: dir}, nil
	}
	if err != nil {
		return nil, err
	}
	s := &state{}
	if err := json.Unmarshal(b, s); err != nil {
		return nil, fmt.Errorf("%s: %w", stateFile(dir), err)
	}
	return s, nil
}

// Supervisor is the process id of the process running the cluster in dir,
// or 0 when none runs.
func Supervisor(dir string) (int, error) {
	s, err := loadState(dir)
	if err != nil {
		return 0, err
	}
	if s.Supervisor == 0 || s.Supervisor == os.Getpid() || !alive(s.Supervisor) {
		return 0, nil
	}
	return s.Supervisor, nil
}

// CheckNoOtherCluster fails when a cluster already runs in dir.
func CheckNoOtherCluster(dir string) error {
	pid, err := Supervisor(dir)
	if err != nil {
		return err
	}
	if pid != 0 {
		return fmt.Errorf("a local cluster already runs in %s (process %d): stop it first (make down)", dir, pid)
	}
	return nil
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// start runs bin with args, its output in logs/<name>.log, and records it.
func (c *Cluster) start(name, bin string, args ...string) error {
	_, err := c.startEnv(name, nil, bin, args...)
	return err
}

// startEnv is start with env added to the process's environment (later
// entries win); the channel receives how the process ended.
func (c *Cluster) startEnv(name string, env []string, bin string, args ...string) (<-chan error, error) {
	if bin == "" {
		return nil, fmt.Errorf("no binary configured for %s", name)
	}
	logFile := filepath.Join(c.layout.logs(), name+".log")
	if err := os.MkdirAll(filepath.Dir(logFile), 0o700); err != nil {
		return nil, err
	}
	log, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer func() { _ = log.Close() }()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	// Its own process group: a Ctrl-C meant for the supervisor does not
	// reach it, so the supervisor stops everything in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	// The process is waited for by nobody but the kernel's reaper once the
	// supervisor exits; reap it here so it never lingers as a zombie.
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return done, c.st.update(func() { c.st.Processes = append(c.st.Processes, proc{Name: name, PID: cmd.Process.Pid}) })
}

// logTail is the end of a process's log, for errors.
func (c *Cluster) logTail(name string) string {
	tail, _ := TailFile(filepath.Join(c.layout.logs(), name+".log"), 15)
	return tail
}

// TailFile is the last n lines of a file, such as a log.
func TailFile(file string, n int) (string, error) {
	b, err := os.ReadFile(file)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n"), err
}

// running fails when the process recorded under name has exited.
func (c *Cluster) running(name string) error {
	for _, p := range c.st.processes(func(p proc) bool { return p.Name == name }) {
		if !alive(p.PID) {
			return fmt.Errorf("%s exited; its log ends with:\n%s", name, c.logTail(name))
		}
	}
	return nil
}

// Poll calls check every interval until it returns nil, and reports its
// last error once timeout has passed. A non-nil abort ends the wait at once
// when it returns an error (a process that exited, say).
func Poll(ctx context.Context, timeout, interval time.Duration, check func(context.Context) error, abort func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		if abort != nil {
			if err := abort(); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready after %s: %w", timeout, err)
		case <-time.After(interval):
		}
	}
}

// poll waits for check while the process name runs.
func (c *Cluster) poll(ctx context.Context, name string, timeout time.Duration, check func(context.Context) error) error {
	return Poll(ctx, timeout, 250*time.Millisecond, check, func() error { return c.running(name) })
}

// urlReady is a check that url answers 200 (to the admin client, over TLS).
func (c *Cluster) urlReady(url string) func(context.Context) error {
	return func(ctx context.Context) error {
		cert, err := tls.LoadX509KeyPair(c.layout.pki("admin.crt"), c.layout.pki("admin.key"))
		if err != nil {
			return err
		}
		hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
			// The host's own freshly issued server: the admin client
			// certificate is what matters here, not the server's identity.
			TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{cert}, InsecureSkipVerify: true}, //nolint:gosec // see above
		}}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s answered %s", url, resp.Status)
		}
		return nil
	}
}
