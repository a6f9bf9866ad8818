package restore

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"

	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/etcd/snapshotcheck"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/contract"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/netfail"
)

// Member is one etcd member about to start, and the snapshot it would
// restore.
type Member struct {
	// DataDir is etcd's --data-dir.
	DataDir string
	// Name, PeerURLs, InitialCluster, InitialClusterState and
	// InitialClusterToken are what etcd starts with: --name,
	// --initial-advertise-peer-urls (comma separated), --initial-cluster,
	// --initial-cluster-state and --initial-cluster-token.
	Name, PeerURLs, InitialCluster, InitialClusterState, InitialClusterToken string
	// Key names the snapshot, URL is where to GET it, and CA, when set, is
	// the PEM CA of URL's server.
	Key, URL string
	CA       []byte
	// ID names a restore in place, which replaces the data the member
	// holds; empty for a restore at creation.
	ID string
}

// marker is the file beside the data directory that names the restore in
// place the data was restored for.
func (m Member) marker() string {
	return filepath.Join(filepath.Dir(filepath.Clean(m.DataDir)), "restore-id")
}

// Skip says why the member must not restore, or "" when it restores.
func Skip(m Member) (string, error) {
	if m.InitialClusterState != "new" {
		return fmt.Sprintf("member %s joins an existing cluster (initial cluster state %q) and syncs from its peers", m.Name, m.InitialClusterState), nil
	}
	if m.ID != "" {
		done, err := os.ReadFile(m.marker())
		switch {
		case err == nil && string(done) == m.ID:
			return fmt.Sprintf("member %s was restored for restore %s already", m.Name, m.ID), nil
		case err != nil && !errors.Is(err, os.ErrNotExist):
			return "", fmt.Errorf("read %s: %w", m.marker(), err)
		}
		return "", nil // whatever the data directory holds gives way
	}
	entries, err := os.ReadDir(m.DataDir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("read the data directory: %w", err)
	case len(entries) > 0:
		return fmt.Sprintf("member %s: data directory %s already holds data", m.Name, m.DataDir), nil
	}
	return "", nil
}

// Restored is what a member restored.
type Restored struct {
	Key string
	// Size is the snapshot's size in bytes, Revision the revision it holds
	// (before the bump).
	Size, Revision int64
}

// Restore downloads the member's snapshot beside its data directory and
// restores it there. A data directory appears only once it is complete.
// For a restore in place, the data the member held is deleted once the
// snapshot is downloaded and has passed its sha256 check (so that the
// volume needs room for the snapshot beside one database, not two), and
// the marker beside the data directory names the restore once it is done.
func Restore(ctx context.Context, m Member) (Restored, error) {
	parent := filepath.Dir(filepath.Clean(m.DataDir))
	file := filepath.Join(parent, "restore-snapshot.db")
	work := filepath.Join(parent, "restore-data.tmp")
	// Whatever a crash left behind is not trusted.
	for _, stale := range []string{file, work} {
		if err := os.RemoveAll(stale); err != nil {
			return Restored{}, err
		}
	}
	defer func() { _ = os.Remove(file) }()
	size, err := download(ctx, m, file)
	if err != nil {
		return Restored{}, fmt.Errorf("download %s: %w", m.Key, err)
	}
	mgr := snapshot.NewV3(zap.NewNop())
	status, err := mgr.Status(file)
	if err != nil {
		return Restored{}, fmt.Errorf("read snapshot %s: %w", m.Key, err)
	}
	if err := os.RemoveAll(m.DataDir); err != nil {
		return Restored{}, fmt.Errorf("delete the data the member held: %w", err)
	}
	err = mgr.Restore(snapshot.RestoreConfig{
		SnapshotPath: file, Name: m.Name, OutputDataDir: work,
		PeerURLs: strings.Split(m.PeerURLs, ","), InitialCluster: m.InitialCluster, InitialClusterToken: m.InitialClusterToken,
		RevisionBump: contract.EtcdRevisionBump, MarkCompacted: true,
	})
	if err != nil {
		return Restored{}, fmt.Errorf("restore %s: %w", m.Key, err)
	}
	if err := os.Rename(work, m.DataDir); err != nil {
		return Restored{}, err
	}
	if m.ID != "" {
		if err := os.WriteFile(m.marker(), []byte(m.ID), 0o600); err != nil {
			return Restored{}, err
		}
	}
	if err := syncDir(parent); err != nil {
		return Restored{}, err
	}
	return Restored{Key: m.Key, Size: size, Revision: status.Revision}, nil
}

// s3ErrorCode finds the code of an S3 error document.
var s3ErrorCode = regexp.MustCompile(`<Code>([A-Za-z0-9]{1,64})</Code>`)

// download streams the member's URL into file and returns its size.
func download(ctx context.Context, m Member, file string) (int64, error) {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	if len(m.CA) > 0 {
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(m.CA) {
			return 0, errors.New("the store's CA holds no PEM certificate")
		}
		transport.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.URL, nil)
	if err != nil {
		return 0, err
	}
	resp, err := (&http.Client{Transport: transport}).Do(req)
	if err != nil {
		// The error quotes the URL, whose signature lets anyone who reads
		// the log download the snapshot: only what failed is told.
		return 0, fmt.Errorf("GET of the snapshot's URL: %s", cmp.Or(netfail.Describe(err), "the request failed"))
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		// Only the S3 error code of the body: its other parts may quote the
		// request and its credentials.
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		if code := s3ErrorCode.FindSubmatch(body); code != nil {
			return 0, fmt.Errorf("the store answered %s (%s)", resp.Status, code[1])
		}
		return 0, fmt.Errorf("the store answered %s", resp.Status)
	}
	f, err := os.OpenFile(file, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600) //nolint:gosec // beside the data directory etcd was given
	if err != nil {
		return 0, err
	}
	size, err := io.Copy(f, snapshotcheck.Reader(resp.Body))
	if err == nil && resp.ContentLength >= 0 && size != resp.ContentLength {
		err = fmt.Errorf("got %d of %d bytes", size, resp.ContentLength)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return size, err
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir) //nolint:gosec // the directory of the data directory etcd was given
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
