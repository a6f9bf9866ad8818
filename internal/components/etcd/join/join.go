package join

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Member is what the wait needs of a starting member: etcd's --name,
// --data-dir and --initial-advertise-peer-urls, and ETCD_INITIAL_CLUSTER
// and ETCD_INITIAL_CLUSTER_STATE.
type Member struct {
	Name, DataDir, PeerURLs             string
	InitialCluster, InitialClusterState string
}

// Skip says why a member needs no wait: it founds a new cluster (its peers
// start beside it, and etcd waits for them itself) or has a data directory
// (etcd knows its cluster then, and retries its peers without exiting).
// It is empty when the member joins.
func Skip(m Member) (string, error) {
	if m.InitialClusterState != "existing" {
		return fmt.Sprintf("member %s founds a new cluster (initial cluster state %q)", m.Name, m.InitialClusterState), nil
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

// Cluster is the membership a joining member starts with, as etcd reads it
// from its initial cluster.
type Cluster struct {
	// Peers are the peer URLs of the other members, in the order etcd asks
	// them for the cluster (sorted).
	Peers []string
	// URLs are the peer URLs of every member, the member's own included,
	// sorted: etcd joins only when the members its peers list have exactly
	// these.
	URLs []string
}

// ClusterOf parses the member's initial cluster.
func ClusterOf(m Member) (Cluster, error) {
	var c Cluster
	for entry := range strings.SplitSeq(m.InitialCluster, ",") {
		name, raw, ok := strings.Cut(strings.TrimSpace(entry), "=")
		if !ok {
			return c, fmt.Errorf("ETCD_INITIAL_CLUSTER: %q is not name=peer-url", entry)
		}
		if u, err := url.Parse(raw); err != nil || u.Host == "" || u.Port() == "" {
			return c, fmt.Errorf("ETCD_INITIAL_CLUSTER: the peer URL of %s is not a URL with a host and a port: %q", name, raw)
		}
		c.URLs = append(c.URLs, raw)
		if name != m.Name {
			c.Peers = append(c.Peers, raw)
		}
	}
	if len(c.Peers) == 0 {
		return c, fmt.Errorf("ETCD_INITIAL_CLUSTER names no member but %s", m.Name)
	}
	slices.Sort(c.Peers)
	slices.Sort(c.URLs)
	return c, nil
}

// Ask asks the peer at peerURL for the cluster, and returns the peer URLs
// of the members it lists.
type Ask func(ctx context.Context, peerURL string) ([]string, error)

// TLSFiles are etcd's --peer-cert-file, --peer-key-file and
// --peer-trusted-ca-file.
type TLSFiles struct{ Cert, Key, CA string }

// Peers asks peers as a joining etcd does: over the peer TLS, presenting
// the member's own peer certificate, on a new connection each time. A peer
// checks that certificate against the address the connection comes from
// (etcd resolves the certificate's DNS names and closes the connection
// when none resolves to it), so an answer comes only once the cluster's DNS
// lists the pod: until then etcd itself would get none, and exit.
type Peers struct{ client *http.Client }

// NewPeers is Peers with the member's peer certificate and CA, each
// request within timeout.
func NewPeers(files TLSFiles, timeout time.Duration) (*Peers, error) {
	cert, err := tls.LoadX509KeyPair(files.Cert, files.Key)
	if err != nil {
		return nil, fmt.Errorf("load the peer certificate: %w", err)
	}
	ca, err := os.ReadFile(files.CA)
	if err != nil {
		return nil, fmt.Errorf("read the peer CA: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca) {
		return nil, errors.New("the peer CA file holds no PEM certificate")
	}
	return &Peers{client: &http.Client{Timeout: timeout, Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: roots, MinVersion: tls.VersionTLS12},
		DisableKeepAlives: true,
	}}}, nil
}

// get asks the peer at peerURL for path.
func (p *Peers) get(ctx context.Context, peerURL, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, peerURL+path, nil)
	if err != nil {
		return nil, err
	}
	return p.client.Do(req)
}

// Members is an Ask: GET <peer URL>/members, as etcd asks it as it joins.
func (p *Peers) Members(ctx context.Context, peerURL string) ([]string, error) {
	return p.peerURLs(ctx, peerURL, func(member) bool { return true })
}

// Voters is the peer URLs of the voting members that the peer at peerURL
// lists as having run: each published its client URLs, which a member does
// once it has started, on data of its own. A name alone is no sign: the
// founders of a cluster are listed with the names of the initial cluster
// before they ever start.
func (p *Peers) Voters(ctx context.Context, peerURL string) ([]string, error) {
	return p.peerURLs(ctx, peerURL, func(m member) bool { return len(m.ClientURLs) > 0 && !m.IsLearner })
}

// LostData tells whether a joining member, whose peer URLs are self and
// whose data directory is empty, is one of voters (as Voters lists them):
// a voter that has run and lost its data (its volume lost or new). etcd
// would start it under that voter's identity with an empty log, which
// raft's safety forbids: a voter that forgot what it accepted may elect a
// leader that lacks committed entries. It must join as a new member
// instead: removed, added again as a learner, on an empty volume (the
// controller's replacement, which ExitLostData tells it to make).
func LostData(voters, self []string) bool { return containsAll(voters, self) }

// ExitLostData is the exit code of the wait when LostData holds, which the
// controller reads from the pod's status.
const ExitLostData = 3

// Starting is the peer URLs of the members that the peer at peerURL lists
// and that have not started yet: a member publishes its name once it has
// started, and learners just added have none.
func (p *Peers) Starting(ctx context.Context, peerURL string) ([]string, error) {
	return p.peerURLs(ctx, peerURL, func(m member) bool { return m.Name == "" })
}

// peerURLs asks the peer at peerURL for the cluster's members and returns
// the peer URLs of those to keep, sorted.
func (p *Peers) peerURLs(ctx context.Context, peerURL string, keep func(member) bool) ([]string, error) {
	resp, err := p.get(ctx, peerURL, "/members")
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	members, err := membersOf(resp)
	if err != nil {
		return nil, err
	}
	var urls []string
	for _, m := range members {
		if keep(m) {
			urls = append(urls, m.PeerURLs...)
		}
	}
	slices.Sort(urls)
	return urls, nil
}

// Serves asks the etcd at peerURL for its version, which it answers once
// it has started: until then its peer port may take the connection and
// answer nothing.
func (p *Peers) Serves(ctx context.Context, peerURL string) error {
	resp, err := p.get(ctx, peerURL, "/version")
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /version: %s", resp.Status)
	}
	return nil
}

// member is a member as a peer lists it.
type member struct {
	Name       string   `json:"name"`
	PeerURLs   []string `json:"peerURLs"`
	ClientURLs []string `json:"clientURLs"`
	IsLearner  bool     `json:"isLearner"`
}

// ErrAnswer is an answer etcd would not join with.
var ErrAnswer = errors.New("the answer is no cluster")

// membersOf reads an answer as etcd does: a member list, not empty, with
// the cluster's ID in a header.
func membersOf(resp *http.Response) ([]member, error) {
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("read the answer: %w", err)
	}
	var members []member
	if err := json.Unmarshal(body, &members); err != nil {
		return nil, fmt.Errorf("%w: %s, not a member list", ErrAnswer, resp.Status)
	}
	if _, err := strconv.ParseUint(resp.Header.Get("X-Etcd-Cluster-ID"), 16, 64); err != nil {
		return nil, fmt.Errorf("%w: no cluster ID", ErrAnswer)
	}
	if len(members) == 0 {
		return nil, fmt.Errorf("%w: no member listed", ErrAnswer)
	}
	return members, nil
}

// ErrStale is the end of a wait whose peers list the member, with other
// members than the initial cluster it read names (one read before the
// controller added the member, whose pod was already there: a member
// replaced on a new volume): etcd would refuse to join with it, and only a
// new start of the container reads it anew.
var ErrStale = errors.New("the peers list this member, with members other than the initial cluster read at start")

// Wait asks the peers for the cluster, in etcd's order, every interval,
// until the first that answers lists exactly the members of c, which is
// what etcd needs to join; it returns that peer. It returns ErrStale when
// that answer lists the member (self, its peer URLs) beside other members
// than c's, and the last failure when ctx ends. told hears of each peer
// that let the member not join, and why.
func Wait(ctx context.Context, c Cluster, self []string, ask Ask, every time.Duration, told func(peer string, err error)) (string, error) {
	for {
		peer, err := round(ctx, c, self, ask, told)
		if err == nil || errors.Is(err, ErrStale) {
			return peer, err
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("no peer let the member join: %w", err)
		case <-time.After(every):
		}
	}
}

// ErrNotListed is a peer's answer that does not list the member yet: the
// controller adds it to etcd as a learner, and etcd would refuse it before.
var ErrNotListed = errors.New("the peer does not list this member yet")

// round asks each peer until one answers, as etcd takes the first answer,
// and says whether it lets the member join.
func round(ctx context.Context, c Cluster, self []string, ask Ask, told func(string, error)) (string, error) {
	var err error
	for _, peer := range c.Peers {
		var listed []string
		listed, err = ask(ctx, peer)
		switch {
		case err != nil:
			told(peer, err)
			continue
		case !containsAll(listed, self):
			err = ErrNotListed
			told(peer, err)
		case !slices.Equal(listed, c.URLs):
			err = ErrStale
		}
		return peer, err
	}
	return "", err
}

func containsAll(urls, want []string) bool {
	return len(want) > 0 && !slices.ContainsFunc(want, func(u string) bool { return !slices.Contains(urls, u) })
}

// Before is, of the members starting (peer URLs), those that start before
// the member whose peer URLs are self: those whose peer URL sorts before
// each of self's. Members added together start one after the other in that
// order (see the package doc for why).
func Before(starting, self []string) []string {
	var out []string
	for _, u := range starting {
		if !slices.ContainsFunc(self, func(own string) bool { return u >= own }) {
			out = append(out, u)
		}
	}
	return out
}

// WaitServing asks each of peers whether it serves (see Peers.Serves),
// every interval, until all do or ctx ends, which it returns with the last
// failure. told hears of each peer that does not serve yet, and why.
func WaitServing(ctx context.Context, peers []string, serves func(ctx context.Context, peerURL string) error, every time.Duration, told func(peer string, err error)) error {
	waiting := slices.Clone(peers)
	for {
		var err error
		waiting = slices.DeleteFunc(waiting, func(peer string) bool {
			if e := serves(ctx, peer); e != nil {
				err = e
				told(peer, e)
				return false
			}
			return true
		})
		if len(waiting) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s does not serve yet: %w", strings.Join(waiting, ", "), err)
		case <-time.After(every):
		}
	}
}
