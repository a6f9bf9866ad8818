package backup

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

// DefaultPartSize is the size of each part of a snapshot's multipart
// upload, and so the memory one upload holds.
const DefaultPartSize = 16 << 20

// store is the bucket and folder of the snapshots of one control plane, as
// its backup Secret names them.
type store struct {
	client    *minio.Client
	transport *http.Transport
	endpoint  string
	bucket    string
	// prefix is the bucket's prefix (after the first "/" of the bucket
	// key) and the cluster's folder, ending in "/".
	prefix string
	// ca is the PEM CA the backup Secret trusts for the endpoint, if any.
	ca []byte
}

// openStore reads the backup Secret of hcp and makes a client of the store
// it names, on the folder of the Cluster named folder (<namespace>/<name>).
func openStore(ctx context.Context, r client.Reader, hcp *v1alpha1.HostedControlPlane, folder string) (*store, error) {
	ref := hcp.Spec.Etcd.Backup.Secret
	name := client.ObjectKey{Namespace: ptr.Deref(ref.Namespace, hcp.Namespace), Name: ref.Name}
	secret := &corev1.Secret{}
	if err := r.Get(ctx, name, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, problem(v1alpha1.BackupSecretInvalidReason, "backup Secret %s does not exist", name)
		}
		return nil, fmt.Errorf("read backup Secret %s: %w", name, err)
	}
	// The region may be empty: the client then asks the store for it.
	var missing []string
	value := func(key *string, fallback string, required bool) string {
		v := strings.TrimSpace(string(secret.Data[ptr.Deref(key, fallback)]))
		if v == "" && required {
			missing = append(missing, strconv.Quote(ptr.Deref(key, fallback)))
		}
		return v
	}
	host, region, bucket := value(ref.HostKey, "host", true), value(ref.RegionKey, "region", false), value(ref.BucketKey, "bucket", true)
	id, key := value(ref.AccessKeyIDKey, "accessKeyID", true), value(ref.SecretAccessKeyKey, "secretAccessKey", true)
	if len(missing) > 0 {
		return nil, problem(v1alpha1.BackupSecretInvalidReason, "backup Secret %s has no value for %s", name, strings.Join(missing, ", "))
	}
	transport, err := minio.DefaultTransport(true)
	if err != nil {
		return nil, err
	}
	ca := secret.Data[ptr.Deref(ref.CAKey, "ca.crt")]
	if len(ca) > 0 {
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(ca) {
			return nil, problem(v1alpha1.BackupSecretInvalidReason, "backup Secret %s: key %q holds no PEM certificate", name, ptr.Deref(ref.CAKey, "ca.crt"))
		}
		transport.TLSClientConfig.RootCAs = roots
	}
	bucket, prefix, _ := strings.Cut(bucket, "/")
	if prefix = strings.Trim(prefix, "/"); prefix != "" {
		prefix += "/"
	}
	// Path-style unless the endpoint is one known to serve buckets as
	// host names (AWS, Google): other stores rarely have the DNS for it.
	c, err := minio.New(host, &minio.Options{
		Creds: credentials.NewStaticV4(id, key, ""), Secure: true, Region: region,
		Transport: transport, BucketLookup: minio.BucketLookupAuto,
	})
	if err != nil {
		return nil, problem(v1alpha1.BackupSecretInvalidReason, "backup Secret %s: endpoint %q: %v", name, host, err)
	}
	return &store{
		client: c, transport: transport, endpoint: host, bucket: bucket,
		prefix: prefix + folder + "/", ca: ca,
	}, nil
}

func (s *store) close() { s.transport.CloseIdleConnections() }

// put uploads r as key in parts of partSize and returns the stored size.
// The upload completes only if r ends without error.
func (s *store) put(ctx context.Context, key string, r io.Reader, partSize uint64) (int64, error) {
	info, err := s.client.PutObject(ctx, s.bucket, key, r, -1, minio.PutObjectOptions{
		PartSize: partSize, ContentType: "application/octet-stream",
	})
	if err != nil {
		return 0, s.explain(err)
	}
	return info.Size, nil
}

// size is the stored size of key.
func (s *store) size(ctx context.Context, key string) (int64, error) {
	info, err := s.client.StatObject(ctx, s.bucket, key, minio.StatObjectOptions{})
	if err != nil {
		return 0, s.explain(err)
	}
	return info.Size, nil
}

func (s *store) remove(ctx context.Context, key string) error {
	return s.explain(s.client.RemoveObject(ctx, s.bucket, key, minio.RemoveObjectOptions{}))
}

// snapshotName is the name of a snapshot object within a cluster's folder.
var snapshotName = regexp.MustCompile(`^\d{8}T\d{6}\.\d{3}Z-rev\d+\.db$`)

// snapshots lists the keys of the cluster's snapshots, oldest first; other
// objects in its folder are not counted.
func (s *store) snapshots(ctx context.Context) ([]string, error) {
	var keys []string
	for obj := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: s.prefix}) {
		if obj.Err != nil {
			return nil, s.explain(obj.Err)
		}
		if snapshotName.MatchString(strings.TrimPrefix(obj.Key, s.prefix)) {
			keys = append(keys, obj.Key)
		}
	}
	slices.Sort(keys)
	return keys, nil
}

// keepNewest deletes all but the keep newest snapshots of the cluster and
// returns what it deleted.
func (s *store) keepNewest(ctx context.Context, keep int) ([]string, error) {
	keys, err := s.snapshots(ctx)
	if err != nil {
		return nil, err
	}
	if len(keys) <= keep {
		return nil, nil
	}
	old := keys[:len(keys)-keep]
	for _, key := range old {
		if err := s.remove(ctx, key); err != nil {
			return nil, fmt.Errorf("retention: delete %s: %w", key, err)
		}
	}
	return old, nil
}

// explain turns what the store answered into a problem that says what
// failed in a user's words.
func (s *store) explain(err error) error {
	if err == nil {
		return nil
	}
	switch minio.ToErrorResponse(err).Code {
	case minio.NoSuchBucket:
		return problem(v1alpha1.BucketNotFoundReason, "bucket %q does not exist at %s", s.bucket, s.endpoint)
	case "InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "InvalidToken", "ExpiredToken":
		return problem(v1alpha1.CredentialsRefusedReason, "%s refused the credentials of the backup Secret: %s",
			s.endpoint, minio.ToErrorResponse(err).Message)
	}
	// Whatever fails before an answer: no route, refused or reset
	// connections, timeouts, a certificate that is not trusted.
	var transport *url.Error
	var network *net.OpError
	if errors.As(err, &transport) || errors.As(err, &network) {
		return problem(v1alpha1.EndpointUnreachableReason, "S3 endpoint %s is unreachable: %v", s.endpoint, err)
	}
	return fmt.Errorf("S3 endpoint %s: %w", s.endpoint, err)
}
