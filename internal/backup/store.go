package backup

import (
	"cmp"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/netfail"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/refgrant"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/telemetry"
)

// DefaultPartSize is the size of each part of a snapshot's multipart
// upload, and so the memory one upload holds.
const DefaultPartSize = 16 << 20

// store is the bucket and folder of the snapshots of one control plane, as
// its backup Secret names them.
type store struct {
	objects objects
	// origin names the backup Secret and the keys the store's settings came
	// from: messages name those, never a value.
	origin origin
	// root is the bucket's prefix (after the first "/" of the bucket key),
	// empty or ending in "/"; every cluster's folder is under it.
	root string
	// prefix is root and the cluster's folder, ending in "/".
	prefix string
	// ca is the PEM CA the backup Secret trusts for the endpoint, if any.
	ca []byte
}

// objects is what this package does with the objects of a bucket. Every
// error it returns is already explained (a problem, or an error that names
// the backup Secret and never its values), except what the reader of put
// ended with, which it returns as it is. s3Bucket is the S3 one; the unit
// tests keep objects in memory.
type objects interface {
	// list is the keys under prefix, in any order.
	list(ctx context.Context, prefix string) ([]string, error)
	// put uploads r as key in parts of partSize and returns the stored
	// size; the upload completes only if r ends without error.
	put(ctx context.Context, key string, r io.Reader, partSize uint64) (int64, error)
	// size is the stored size of key; exists tells whether there is one,
	// and a missing bucket is an error.
	size(ctx context.Context, key string) (size int64, exists bool, err error)
	remove(ctx context.Context, key string) error
	// presign is a URL that reads key without credentials until expiry.
	presign(ctx context.Context, key string, expiry time.Duration) (string, error)
	close()
}

// opener makes the store of hcp's backup Secret on the folder of the
// Cluster named folder (<namespace>/<name>); openStore is the real one.
type opener func(ctx context.Context, r client.Reader, hcp *v1alpha1.HostedControlPlane, folder string) (*store, error)

// origin is where a store's settings come from, for messages.
type origin struct {
	secret             client.ObjectKey
	hostKey, bucketKey string
}

func (o origin) String() string { return "backup Secret " + o.secret.String() }

// openStore makes a client of the store that the backup Secret of hcp
// names, on the folder of the Cluster named folder (<namespace>/<name>).
// A Secret or a folder in another namespace is read only while a
// ReferenceGrant there allows it, and the grant is checked first, so that
// without one nothing is read and nothing tells whether it exists.
func openStore(ctx context.Context, r client.Reader, hcp *v1alpha1.HostedControlPlane, folder string) (*store, error) {
	ref := hcp.Spec.Etcd.Backup.Secret
	src := origin{
		secret:  client.ObjectKey{Namespace: ptr.Deref(ref.Namespace, hcp.Namespace), Name: ref.Name},
		hostKey: ptr.Deref(ref.HostKey, "host"), bucketKey: ptr.Deref(ref.BucketKey, "bucket"),
	}
	err := refgrant.Check(ctx, r, hcp.Namespace, refgrant.Target{Kind: "Secret", Namespace: src.secret.Namespace, Name: src.secret.Name})
	if err != nil {
		return nil, notPermitted("spec.etcd.backup.secret", err)
	}
	if err := permitFolder(ctx, r, hcp, folder); err != nil {
		return nil, err
	}
	secret := &corev1.Secret{}
	if err := r.Get(ctx, src.secret, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, problem(v1alpha1.BackupSecretInvalidReason, "%s does not exist", src)
		}
		return nil, fmt.Errorf("read %s: %w", src, err)
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
		return nil, problem(v1alpha1.BackupSecretInvalidReason, "%s has no value for %s", src, strings.Join(missing, ", "))
	}
	transport, err := minio.DefaultTransport(true)
	if err != nil {
		return nil, err
	}
	ca := secret.Data[ptr.Deref(ref.CAKey, "ca.crt")]
	if len(ca) > 0 {
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(ca) {
			return nil, problem(v1alpha1.BackupSecretInvalidReason, "%s: key %q holds no PEM certificate", src, ptr.Deref(ref.CAKey, "ca.crt"))
		}
		transport.TLSClientConfig.RootCAs = roots
	}
	bucket, root, _ := strings.Cut(bucket, "/")
	if root = strings.Trim(root, "/"); root != "" {
		root += "/"
	}
	// Path-style unless the endpoint is one known to serve buckets as
	// host names (AWS, Google): other stores rarely have the DNS for it.
	c, err := minio.New(host, &minio.Options{
		Creds: credentials.NewStaticV4(id, key, ""), Secure: true, Region: region,
		Transport: telemetry.Untold(transport), BucketLookup: minio.BucketLookupAuto,
	})
	if err != nil {
		// The client's error quotes the value.
		return nil, problem(v1alpha1.BackupSecretInvalidReason,
			"%s: key %q holds no S3 endpoint: it must be a host or host:port, without scheme or path", src, src.hostKey)
	}
	return &store{
		objects: &s3Bucket{client: c, transport: transport, origin: src, name: bucket},
		origin:  src, root: root, prefix: root + folder + "/", ca: ca,
	}, nil
}

// notPermitted is the problem of a reference that no grant allows, made
// by field; other errors of the check pass as they are.
func notPermitted(field string, err error) error {
	if errors.Is(err, refgrant.ErrNotPermitted) {
		return problem(v1alpha1.RefNotPermittedReason, "%s: %v", field, err)
	}
	return err
}

// permitFolder checks that hcp may read the snapshots of the Cluster named
// folder (<namespace>/<name>): its own namespace's, or one a grant allows.
func permitFolder(ctx context.Context, r client.Reader, hcp *v1alpha1.HostedControlPlane, folder string) error {
	ns, name, _ := strings.Cut(folder, "/")
	target := refgrant.Target{Group: clusterv1.GroupVersion.Group, Kind: "Cluster", Namespace: ns, Name: name}
	return notPermitted("the snapshots of Cluster "+folder, refgrant.Check(ctx, r, hcp.Namespace, target))
}

// permitKey checks that hcp may read the snapshot key: one of a cluster's
// folder under the store's root, in its own namespace or a granted one.
func (s *store) permitKey(ctx context.Context, r client.Reader, hcp *v1alpha1.HostedControlPlane, key string) error {
	folder, err := s.folderOf(key)
	if err != nil {
		return err
	}
	return permitFolder(ctx, r, hcp, folder)
}

// folderOf is the folder (<namespace>/<cluster>) a snapshot's key is in;
// a key outside the store's root, or not a snapshot's, has none.
func (s *store) folderOf(key string) (string, error) {
	rest, ok := strings.CutPrefix(key, s.root)
	parts := strings.Split(rest, "/")
	if !ok || len(parts) != 3 || !snapshotName.MatchString(parts[2]) {
		return "", problem(v1alpha1.RefNotPermittedReason,
			"snapshot %s is not a snapshot of a cluster's folder under the bucket prefix that key %q of %s names", key, s.origin.bucketKey, s.origin)
	}
	return parts[0] + "/" + parts[1], nil
}

// folder is the store's cluster folder, <namespace>/<name>.
func (s *store) folder() string { return strings.TrimSuffix(strings.TrimPrefix(s.prefix, s.root), "/") }

func (s *store) close() { s.objects.close() }

// s3Bucket is a bucket of an S3 endpoint.
type s3Bucket struct {
	client    *minio.Client
	transport *http.Transport
	origin    origin
	name      string
}

func (b *s3Bucket) close() { b.transport.CloseIdleConnections() }

func (b *s3Bucket) put(ctx context.Context, key string, r io.Reader, partSize uint64) (int64, error) {
	in := &tracked{r: r}
	info, err := b.client.PutObject(ctx, b.name, key, in, -1, minio.PutObjectOptions{
		PartSize: partSize, ContentType: "application/octet-stream",
	})
	switch {
	case in.err != nil:
		return 0, in.err
	case err != nil:
		return 0, b.explain(err)
	}
	return info.Size, nil
}

// tracked remembers the error its reader ended with, other than its end.
type tracked struct {
	r   io.Reader
	err error
}

func (s *tracked) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		s.err = err
	}
	return n, err
}

func (b *s3Bucket) size(ctx context.Context, key string) (int64, bool, error) {
	info, err := b.client.StatObject(ctx, b.name, key, minio.StatObjectOptions{})
	switch {
	case err == nil:
		return info.Size, true, nil
	case minio.ToErrorResponse(err).Code != minio.NoSuchKey:
		return 0, false, b.explain(err)
	}
	// A HEAD answers a missing bucket with the same bare 404.
	if exists, err := b.client.BucketExists(ctx, b.name); err != nil || !exists {
		return 0, false, b.explain(cmp.Or(err, error(minio.ErrorResponse{Code: minio.NoSuchBucket})))
	}
	return 0, false, nil
}

func (b *s3Bucket) remove(ctx context.Context, key string) error {
	return b.explain(b.client.RemoveObject(ctx, b.name, key, minio.RemoveObjectOptions{}))
}

func (b *s3Bucket) list(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	for obj := range b.client.ListObjects(ctx, b.name, minio.ListObjectsOptions{Prefix: prefix}) {
		if obj.Err != nil {
			return nil, b.explain(obj.Err)
		}
		keys = append(keys, obj.Key)
	}
	return keys, nil
}

func (b *s3Bucket) presign(ctx context.Context, key string, expiry time.Duration) (string, error) {
	u, err := b.client.PresignedGetObject(ctx, b.name, key, expiry, nil)
	if err != nil {
		return "", b.explain(err)
	}
	return u.String(), nil
}

// snapshotName is the name of a snapshot object within a cluster's folder.
var snapshotName = regexp.MustCompile(`^\d{8}T\d{6}\.\d{3}Z-rev\d+\.db$`)

// snapshots lists the keys of the cluster's snapshots, oldest first; other
// objects in its folder are not counted.
func (s *store) snapshots(ctx context.Context) ([]string, error) {
	all, err := s.objects.list(ctx, s.prefix)
	if err != nil {
		return nil, err
	}
	var keys []string
	for _, key := range all {
		if snapshotName.MatchString(strings.TrimPrefix(key, s.prefix)) {
			keys = append(keys, key)
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
		if err := s.objects.remove(ctx, key); err != nil {
			return nil, fmt.Errorf("retention: delete %s: %w", key, err)
		}
	}
	return old, nil
}

// explain turns what the store answered into a problem that says what
// failed in a user's words. It names the Secret and its keys, never their
// values: the endpoint, the bucket and the credentials stay out, and so does
// the text of the store's answer, which may quote them.
func (b *s3Bucket) explain(err error) error {
	if err == nil {
		return nil
	}
	switch code := minio.ToErrorResponse(err).Code; code {
	case "":
	case minio.NoSuchBucket:
		return problem(v1alpha1.BucketNotFoundReason, "the bucket that key %q of %s names does not exist at its endpoint", b.origin.bucketKey, b.origin)
	case "InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "InvalidToken", "ExpiredToken":
		return problem(v1alpha1.CredentialsRefusedReason, "the S3 endpoint refused the credentials of %s (%s)", b.origin, code)
	default:
		return fmt.Errorf("the S3 endpoint of %s answered %s", b.origin, sanitizeCode(code))
	}
	if why := netfail.Describe(err); why != "" {
		return problem(v1alpha1.EndpointUnreachableReason, "the S3 endpoint that key %q of %s names is unreachable: %s", b.origin.hostKey, b.origin, why)
	}
	return fmt.Errorf("the S3 request to the endpoint of %s failed", b.origin)
}
