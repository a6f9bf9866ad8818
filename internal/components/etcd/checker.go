package etcd

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/render"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/telemetry"
)

// DefaultCallTimeout bounds each call to an etcd member. Members are asked
// in parallel, so a check takes at most about twice this long.
const DefaultCallTimeout = 2 * time.Second

// Target is an etcd cluster to check.
type Target struct {
	// Cluster is the Cluster the etcd belongs to; clients are cached under it.
	Cluster types.NamespacedName
	// ServerName is the DNS name every member's serving certificate carries.
	ServerName string
	// Endpoints are the host:port addresses of the members' client port.
	Endpoints []string
	// Credentials are the health-check client certificate and the CA that
	// signs etcd's serving certificates.
	Credentials render.Credentials
	// Names are the pods of the endpoints, when known.
	Names map[string]string
	// Quota is the backend quota the members were started with
	// (contract.EtcdQuotaOf), for members that do not report theirs;
	// zero when not known.
	Quota int64
}

// Checker checks etcd clusters and changes their membership. It keeps one
// client per member endpoint and reuses it for as long as the cluster's
// credentials stay the same, across passes and hook calls, until Forget. It
// is safe for concurrent use.
type Checker struct {
	// CallTimeout bounds each call to etcd.
	CallTimeout time.Duration
	// QuotaRatio is the share of its quota a database may fill.
	QuotaRatio float64

	mu       sync.Mutex
	clusters map[types.NamespacedName]*clusterClients
	// changed is when a change to each cluster was last started (see
	// Membership).
	changed map[types.NamespacedName]time.Time
}

// clusterClients are the clients of one cluster, made with the credentials
// whose hash is key.
type clusterClients struct {
	key        [sha256.Size]byte
	tls        *tls.Config
	byEndpoint map[string]*clientv3.Client
}

// NewChecker returns a Checker with the default timeout and quota ratio.
func NewChecker() *Checker {
	return &Checker{CallTimeout: DefaultCallTimeout, QuotaRatio: DefaultQuotaRatio}
}

// Check observes the cluster and judges it. An unreachable or unhealthy
// cluster is a Report with problems; the error is for unusable credentials.
func (c *Checker) Check(ctx context.Context, t Target) (Report, error) {
	o, err := c.Observe(ctx, t)
	if err != nil {
		return Report{}, err
	}
	return Evaluate(o, c.QuotaRatio), nil
}

// Observe asks every endpoint for its status, then one member that answered
// for the member list and the alarms.
// Each observation is a span, "etcd health check", whose calls to the
// members are its children.
func (c *Checker) Observe(ctx context.Context, t Target) (_ Observation, err error) {
	ctx, span := telemetry.Start(ctx, "etcd health check",
		telemetry.Namespace.String(t.Cluster.Namespace), telemetry.Cluster.String(t.Cluster.Name), attribute.Int("etcd.endpoints", len(t.Endpoints)))
	defer func() { telemetry.End(span, err) }()
	clients, err := c.clients(t)
	if err != nil {
		return Observation{}, err
	}
	o := Observation{Statuses: c.statuses(ctx, clients), Quota: t.Quota}
	if s, ok := listFrom(o.Statuses); ok {
		c.listMembersAndAlarms(ctx, clients[s.Endpoint], &o)
	}
	return o, nil
}

// listFrom is the member to ask for the member list and the alarms: the
// leader when it answered, otherwise another voter that did. A learner
// refuses both ("rpc not supported for learner"), so asking the first member
// that answered, by address, would see no members while a learner with a
// lower address catches up.
func listFrom(statuses []Status) (Status, bool) {
	var voter *Status
	for i, s := range statuses {
		if s.Err != nil || s.Learner {
			continue
		}
		if s.MemberID == s.Leader {
			return s, true
		}
		if voter == nil {
			voter = &statuses[i]
		}
	}
	if voter == nil {
		return Status{}, false
	}
	return *voter, true
}

// statuses asks all endpoints in parallel, in the order of their addresses.
func (c *Checker) statuses(ctx context.Context, clients map[string]*clientv3.Client) []Status {
	endpoints := slices.Sorted(maps.Keys(clients))
	out := make([]Status, len(endpoints))
	var wg sync.WaitGroup
	for i, ep := range endpoints {
		wg.Go(func() { out[i] = c.status(ctx, ep, clients[ep]) })
	}
	wg.Wait()
	return out
}

func (c *Checker) status(ctx context.Context, endpoint string, cli *clientv3.Client) Status {
	ctx, cancel := context.WithTimeout(ctx, c.CallTimeout)
	defer cancel()
	// The client's own Status dials a new connection per call; asking over
	// its established connection keeps the check cheap.
	resp, err := pb.NewMaintenanceClient(cli.ActiveConnection()).Status(ctx, &pb.StatusRequest{})
	if err != nil {
		return Status{Endpoint: endpoint, Err: fmt.Errorf("status of %s: %w", endpoint, err)}
	}
	return Status{
		Endpoint: endpoint, MemberID: resp.GetHeader().GetMemberId(), Leader: resp.GetLeader(), Learner: resp.GetIsLearner(),
		DBSize: resp.GetDbSize(), DBSizeInUse: resp.GetDbSizeInUse(), DBSizeQuota: resp.GetDbSizeQuota(),
		Revision: resp.GetHeader().GetRevision(),
	}
}

func (c *Checker) listMembersAndAlarms(ctx context.Context, cli *clientv3.Client, o *Observation) {
	ctx, cancel := context.WithTimeout(ctx, c.CallTimeout)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() {
		resp, err := cli.MemberList(ctx)
		if err != nil {
			o.MembersErr = fmt.Errorf("member list: %w", err)
			return
		}
		for _, m := range resp.Members {
			o.Members = append(o.Members, Member{ID: m.GetID(), Name: m.GetName(), Learner: m.GetIsLearner(), PeerURLs: m.GetPeerURLs()})
		}
	})
	wg.Go(func() {
		resp, err := cli.AlarmList(ctx)
		if err != nil {
			o.AlarmsErr = fmt.Errorf("alarm list: %w", err)
			return
		}
		for _, a := range resp.Alarms {
			o.Alarms = append(o.Alarms, Alarm{MemberID: a.GetMemberID(), Type: a.GetAlarm().String()})
		}
	})
	wg.Wait()
}

// clients returns a client per endpoint of t, creating the missing ones and
// closing those of endpoints that went away. New credentials replace every
// client of the cluster.
func (c *Checker) clients(t Target) (map[string]*clientv3.Client, error) {
	key := credentialsKey(t)
	c.mu.Lock()
	defer c.mu.Unlock()
	cc := c.clusters[t.Cluster]
	if cc == nil || cc.key != key {
		tlsConfig, err := clientTLS(t)
		if err != nil {
			return nil, err
		}
		if cc != nil {
			cc.close()
		}
		cc = &clusterClients{key: key, tls: tlsConfig, byEndpoint: map[string]*clientv3.Client{}}
		if c.clusters == nil {
			c.clusters = map[types.NamespacedName]*clusterClients{}
		}
		c.clusters[t.Cluster] = cc
	}
	if err := cc.sync(t.Endpoints, c.callTimeout()); err != nil {
		return nil, err
	}
	return maps.Clone(cc.byEndpoint), nil
}

// changedAt is when a change to cluster was last started; zero when none
// was.
func (c *Checker) changedAt(cluster types.NamespacedName) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed[cluster]
}

func (c *Checker) callTimeout() time.Duration {
	return cmp.Or(c.CallTimeout, DefaultCallTimeout)
}

func (cc *clusterClients) sync(endpoints []string, timeout time.Duration) error {
	for ep, cli := range cc.byEndpoint {
		if !slices.Contains(endpoints, ep) {
			_ = cli.Close()
			delete(cc.byEndpoint, ep)
		}
	}
	for _, ep := range endpoints {
		if cc.byEndpoint[ep] != nil {
			continue
		}
		cli, err := newClient(ep, cc.tls, timeout)
		if err != nil {
			return err
		}
		cc.byEndpoint[ep] = cli
	}
	return nil
}

// newClient is a client of the member at address. The client knows the
// member by the serving certificate's name, which gRPC then verifies (it
// takes the TLS server name from the endpoint, not from the TLS config),
// and a dialer takes it to the address.
func newClient(address string, tlsConfig *tls.Config, timeout time.Duration) (*clientv3.Client, error) {
	_, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("etcd endpoint %q: %w", address, err)
	}
	dialer := &net.Dialer{Timeout: timeout}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            []string{"https://" + net.JoinHostPort(tlsConfig.ServerName, port)},
		TLS:                  tlsConfig.Clone(),
		DialTimeout:          timeout,
		DialKeepAliveTime:    30 * time.Second,
		DialKeepAliveTimeout: timeout,
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, "tcp", address)
		}), telemetry.GRPC()},
		Logger: zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("etcd client for %s: %w", address, err)
	}
	return cli, nil
}

func (cc *clusterClients) close() {
	for _, cli := range cc.byEndpoint {
		_ = cli.Close()
	}
}

// AddLearners adds the members names as learners, one after another, each
// to advertise peerURL(name), through the member at endpoint: a learner
// receives the log but does not vote until Promote, so it cannot cost the
// cluster its quorum while it catches up. It stops at the first member etcd
// refuses and says how many it added: an etcd that holds fewer learners at
// once (3.5, or max-learners set lower in spec.etcd.args) refuses the
// others with ErrTooManyLearners.
func (c *Checker) AddLearners(ctx context.Context, t Target, endpoint string, names []string, peerURL func(member string) string) (int, error) {
	for i, name := range names {
		err := c.call(ctx, t, endpoint, c.callTimeout(), func(ctx context.Context, cli *clientv3.Client) error {
			_, err := cli.MemberAddAsLearner(ctx, []string{peerURL(name)})
			return err
		})
		if err != nil {
			return i, err
		}
	}
	return len(names), nil
}

// ErrLearnerBehind is Promote's answer while the learner has not caught up
// with the leader's log.
var ErrLearnerBehind = rpctypes.ErrMemberLearnerNotReady

// reconfigurationRefused tells whether etcd refused a membership change for
// now, as its strict reconfiguration check does until the leader has been
// connected to every voter for a few seconds (a member just promoted, a
// member restarted), or as it does a learner beyond those it holds at once:
// the change is to be tried again, not an error.
func reconfigurationRefused(err error) bool {
	return errors.Is(err, rpctypes.ErrUnhealthy) || errors.Is(err, rpctypes.ErrMemberNotEnoughStarted) || errors.Is(err, rpctypes.ErrTooManyLearners)
}

// Promote makes a learner a voting member, once it has caught up.
func (c *Checker) Promote(ctx context.Context, t Target, endpoint string, id uint64) error {
	return c.call(ctx, t, endpoint, c.callTimeout(), func(ctx context.Context, cli *clientv3.Client) error {
		_, err := cli.MemberPromote(ctx, id)
		return err
	})
}

// Remove removes a member from the member list; it stops once it learns.
func (c *Checker) Remove(ctx context.Context, t Target, endpoint string, id uint64) error {
	return c.call(ctx, t, endpoint, c.callTimeout(), func(ctx context.Context, cli *clientv3.Client) error {
		_, err := cli.MemberRemove(ctx, id)
		return err
	})
}

// MoveLeader hands the leadership to member to; endpoint must be the
// leader's.
func (c *Checker) MoveLeader(ctx context.Context, t Target, endpoint string, to uint64) error {
	return c.call(ctx, t, endpoint, c.callTimeout(), func(ctx context.Context, cli *clientv3.Client) error {
		_, err := cli.MoveLeader(ctx, to)
		return err
	})
}

// DefragmentTimeout bounds a defragmentation, which rewrites a member's
// whole database and blocks the member meanwhile.
const DefragmentTimeout = time.Minute

// Defragment rewrites the database of the member at endpoint without the
// space its deleted data held.
func (c *Checker) Defragment(ctx context.Context, t Target, endpoint string) error {
	return c.call(ctx, t, endpoint, DefragmentTimeout, func(ctx context.Context, cli *clientv3.Client) error {
		// Over the established connection, as status: the client's own
		// Defragment dials the endpoint again.
		_, err := pb.NewMaintenanceClient(cli.ActiveConnection()).Defragment(ctx, &pb.DefragmentRequest{})
		return err
	})
}

// DisarmNoSpace disarms every NOSPACE alarm, through the member at endpoint.
// A disarm is a write through raft, which a loaded member may apply after
// the call's timeout: when the call fails, the alarms are listed again, and
// none left is success.
func (c *Checker) DisarmNoSpace(ctx context.Context, t Target, endpoint string) error {
	err := c.call(ctx, t, endpoint, c.callTimeout(), func(ctx context.Context, cli *clientv3.Client) error {
		alarms, err := noSpaceAlarms(ctx, cli)
		if err != nil {
			return err
		}
		for _, a := range alarms {
			if _, err := cli.AlarmDisarm(ctx, &clientv3.AlarmMember{MemberID: a.GetMemberID(), Alarm: a.GetAlarm()}); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		return nil
	}
	var left []*pb.AlarmMember
	if lerr := c.call(ctx, t, endpoint, c.callTimeout(), func(ctx context.Context, cli *clientv3.Client) error {
		var err error
		left, err = noSpaceAlarms(ctx, cli)
		return err
	}); lerr == nil && len(left) == 0 {
		return nil
	}
	return err
}

// noSpaceAlarms are the NOSPACE alarms etcd lists.
func noSpaceAlarms(ctx context.Context, cli *clientv3.Client) ([]*pb.AlarmMember, error) {
	alarms, err := cli.AlarmList(ctx)
	if err != nil {
		return nil, err
	}
	var noSpace []*pb.AlarmMember
	for _, a := range alarms.Alarms {
		if a.GetAlarm() == pb.AlarmType_NOSPACE {
			noSpace = append(noSpace, a)
		}
	}
	return noSpace, nil
}

// call runs f, a change, with the client of endpoint, bounded by timeout.
// What was observed of the cluster before it started is outdated.
func (c *Checker) call(ctx context.Context, t Target, endpoint string, timeout time.Duration, f func(context.Context, *clientv3.Client) error) error {
	clients, err := c.clients(t)
	if err != nil {
		return err
	}
	c.mu.Lock()
	if c.changed == nil {
		c.changed = map[types.NamespacedName]time.Time{}
	}
	c.changed[t.Cluster] = time.Now()
	c.mu.Unlock()
	cli := clients[endpoint]
	if cli == nil {
		return fmt.Errorf("no etcd client for %s: it is not an endpoint of %s", endpoint, t.Cluster)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return f(ctx, cli)
}

// Forget closes the clients of a cluster, for a cluster that goes away.
func (c *Checker) Forget(cluster types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.changed, cluster)
	if cc := c.clusters[cluster]; cc != nil {
		cc.close()
		delete(c.clusters, cluster)
	}
}

// Close closes every client.
func (c *Checker) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, cc := range c.clusters {
		cc.close()
		delete(c.clusters, name)
	}
}

func credentialsKey(t Target) [sha256.Size]byte {
	h := sha256.New()
	for _, part := range [][]byte{[]byte(t.ServerName), t.Credentials.Cert, t.Credentials.Key, t.Credentials.CA} {
		// Length-prefixed, so that moving bytes between parts changes the key.
		_, _ = fmt.Fprintf(h, "%d:", len(part))
		_, _ = h.Write(part)
	}
	return [sha256.Size]byte(h.Sum(nil))
}

func clientTLS(t Target) (*tls.Config, error) {
	cert, err := tls.X509KeyPair(t.Credentials.Cert, t.Credentials.Key)
	if err != nil {
		return nil, fmt.Errorf("etcd client certificate of %s: %w", t.Cluster, err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(t.Credentials.CA) {
		return nil, fmt.Errorf("etcd CA of %s: %w", t.Cluster, errNoPEM)
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		RootCAs:      roots,
		ServerName:   t.ServerName,
		MinVersion:   tls.VersionTLS12,
	}, nil
}

var errNoPEM = errors.New("no PEM encoded certificate")
