package tunnel

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
)

// reloaded is a value made from files and made again when one of them
// changes: a serving certificate cert-manager renews into a mounted Secret
// (the kubelet swaps in new files through a symbolic link), or the cluster
// CA kubeadm wrote on a node. Each use costs a stat per file, so a change
// counts from the next connection on, without a watcher to keep alive.
type reloaded[T any] struct {
	paths []string
	parse func(contents [][]byte) (T, error)
	log   *slog.Logger

	mu      sync.Mutex
	value   T
	loaded  []os.FileInfo // the files value was made from
	lastErr string        // logged once, not on every connection
}

// newReloaded makes the value from the files at paths with parse, and fails
// when it cannot: at start, nothing good came before.
func newReloaded[T any](log *slog.Logger, parse func([][]byte) (T, error), paths ...string) (*reloaded[T], error) {
	r := &reloaded[T]{paths: paths, parse: parse, log: log}
	infos, err := statAll(paths)
	if err == nil {
		err = r.load(infos)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", strings.Join(paths, ", "), err)
	}
	return r, nil
}

// get is the value made from the files as they are now or, when they cannot
// be made into one (half written, say), the last good value.
func (r *reloaded[T]) get() T {
	r.mu.Lock()
	defer r.mu.Unlock()
	infos, err := statAll(r.paths)
	if err == nil {
		if unchanged(infos, r.loaded) {
			return r.value
		}
		err = r.load(infos)
	}
	switch {
	case err == nil:
		r.lastErr = ""
		r.log.Info("read files again", "files", r.paths)
	case err.Error() != r.lastErr:
		r.lastErr = err.Error()
		r.log.Warn("keeping what the files held before", "files", r.paths, "error", r.lastErr)
	}
	return r.value
}

// load reads the files, which infos describe, and makes the value.
func (r *reloaded[T]) load(infos []os.FileInfo) error {
	contents := make([][]byte, len(r.paths))
	for i, p := range r.paths {
		b, err := os.ReadFile(p) //nolint:gosec // a path the operator gave
		if err != nil {
			return err
		}
		contents[i] = b
	}
	v, err := r.parse(contents)
	if err != nil {
		return err
	}
	r.value, r.loaded = v, infos
	return nil
}

func statAll(paths []string) ([]os.FileInfo, error) {
	infos := make([]os.FileInfo, len(paths))
	for i, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		infos[i] = fi
	}
	return infos, nil
}

// unchanged reports whether each file is still the same file with the same
// size and modification time.
func unchanged(now, before []os.FileInfo) bool {
	for i := range now {
		if !os.SameFile(now[i], before[i]) || !now[i].ModTime().Equal(before[i].ModTime()) || now[i].Size() != before[i].Size() {
			return false
		}
	}
	return true
}
