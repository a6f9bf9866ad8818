package tunnel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// dialTimeout bounds a TCP connect to the next hop.
	dialTimeout = 5 * time.Second
	// handshakeTimeout bounds connecting and the outer TLS handshake
	// together; after it, a spliced connection has no deadline at all.
	handshakeTimeout = 10 * time.Second
	// readyTimeout bounds the check behind /readyz, well within a probe's.
	readyTimeout = 3 * time.Second
	// drainTimeout is what open connections get to finish after SIGTERM,
	// within the 30 seconds a pod gets by default.
	drainTimeout = 20 * time.Second
)

// keepAlive notices a peer that vanished without closing, since no idle
// timeout does: watches stay open for hours without a byte.
var keepAlive = net.KeepAliveConfig{Enable: true, Idle: 30 * time.Second, Interval: 10 * time.Second, Count: 3}

// End is one end of the tunnel, Server or Node.
type End interface {
	// Serve serves the connections ln accepts until ctx is done, then
	// drains them.
	Serve(ctx context.Context, ln net.Listener) error
	// Ready says why the end cannot reach its next hop, or nil.
	Ready(ctx context.Context) error
}

// Run serves e on the address listen, and on healthListen its /healthz (200
// while it accepts connections) and /readyz (200 while it also reaches its
// next hop), until ctx is done and open connections are drained.
func Run(ctx context.Context, e End, listen, healthListen string) error {
	lc := net.ListenConfig{KeepAliveConfig: keepAlive}
	ln, err := lc.Listen(ctx, "tcp", listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	hln, err := lc.Listen(ctx, "tcp", healthListen)
	if err != nil {
		_ = ln.Close()
		return fmt.Errorf("listen for health checks: %w", err)
	}
	var listening atomic.Bool
	listening.Store(true)
	// Draining is not serving: probes fail while open connections finish.
	stop := context.AfterFunc(ctx, func() { listening.Store(false) })
	defer stop()
	hs := &http.Server{Handler: health(&listening, e.Ready), ReadHeaderTimeout: readyTimeout}
	go func() { _ = hs.Serve(hln) }()
	defer hs.Close()
	return e.Serve(ctx, ln)
}

// health serves /healthz and /readyz.
func health(listening *atomic.Bool, ready func(context.Context) error) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if !listening.Load() {
			http.Error(w, "not listening", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if !listening.Load() {
			http.Error(w, "not listening", http.StatusServiceUnavailable)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
		defer cancel()
		if err := ready(ctx); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	})
	return mux
}

// accept hands each connection ln accepts to handle until ctx is done, and
// logs one line for each handle that fails. Then it stops accepting, gives
// open connections drain to finish and closes those still open.
func accept(ctx context.Context, ln net.Listener, log *slog.Logger, drain time.Duration,
	handle func(context.Context, net.Conn) error,
) error {
	stop := context.AfterFunc(ctx, func() { _ = ln.Close() })
	defer stop()
	var open openConns
	var delay time.Duration
	for {
		conn, err := ln.Accept()
		if ctx.Err() != nil {
			if conn != nil {
				_ = conn.Close()
			}
			break
		}
		if errors.Is(err, net.ErrClosed) {
			return err
		}
		if err != nil {
			// Out of file descriptors, say: wait for some to free up rather
			// than spin or stop serving every pod of the node.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			log.Warn("accept failed", "error", err.Error(), "retryIn", delay.String())
			time.Sleep(delay)
			continue
		}
		delay = 0
		open.add(conn)
		go func() {
			defer open.remove(conn)
			defer conn.Close()
			if err := handle(ctx, conn); err != nil {
				log.Warn("connection failed", "client", conn.RemoteAddr().String(), "error", err.Error())
			}
		}()
	}
	open.drain(drain)
	return nil
}

// openConns are the connections being served.
type openConns struct {
	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func (o *openConns) add(c net.Conn) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.conns == nil {
		o.conns = map[net.Conn]struct{}{}
	}
	o.conns[c] = struct{}{}
	o.wg.Add(1)
}

func (o *openConns) remove(c net.Conn) {
	o.mu.Lock()
	delete(o.conns, c)
	o.mu.Unlock()
	o.wg.Done()
}

// drain waits up to timeout for every connection to finish, then closes
// those left, which ends their splices, and waits for their handlers.
func (o *openConns) drain(timeout time.Duration) {
	finished := make(chan struct{})
	go func() {
		o.wg.Wait()
		close(finished)
	}()
	select {
	case <-finished:
		return
	case <-time.After(timeout):
	}
	o.mu.Lock()
	for c := range o.conns {
		_ = c.Close()
	}
	o.mu.Unlock()
	<-finished
}

// splice copies bytes both ways between a and b until both directions end,
// then closes both. The end of one direction is passed on as a half-close
// (a TCP FIN, or a TLS close_notify on the outer connection), so a client
// that has sent everything still gets its answer; an error either way ends
// both at once.
func splice(a, b net.Conn) {
	var wg sync.WaitGroup
	pass := func(dst, src net.Conn) {
		defer wg.Done()
		_, err := io.Copy(dst, src)
		if err == nil {
			err = closeWrite(dst)
		}
		if err != nil {
			_ = a.Close()
			_ = b.Close()
		}
	}
	wg.Add(2)
	go pass(a, b)
	go pass(b, a)
	wg.Wait()
	_ = a.Close()
	_ = b.Close()
}

// closeWrite ends what c sends and keeps what it receives: TCP connections
// and TLS connections both can.
func closeWrite(c net.Conn) error {
	if hc, ok := c.(interface{ CloseWrite() error }); ok {
		return hc.CloseWrite()
	}
	return c.Close()
}
