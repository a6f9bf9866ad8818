package etcd

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"slices"
)

// Snapshot is a stream of one member's database as etcd sends it: the
// database, then the sha256 of the database (see VerifyingReader).
type Snapshot struct {
	io.ReadCloser
	// Endpoint is the member the stream comes from.
	Endpoint string
	// Revision is the member's revision just before the snapshot began; the
	// snapshot holds at least that revision.
	Revision int64
}

// ErrNoMember is returned by Snapshot when no member answers with a leader.
var ErrNoMember = errors.New("no etcd member answers with a leader")

// Snapshot opens a snapshot stream from one member of t that answers and
// knows a leader, a follower when there is one, so the leader keeps its
// resources for the cluster's writes; never a learner, which may still be
// catching up. The stream is bounded by ctx alone,
// not by the call timeout: a large database takes long to send.
func (c *Checker) Snapshot(ctx context.Context, t Target) (Snapshot, error) {
	clients, err := c.clients(t)
	if err != nil {
		return Snapshot{}, err
	}
	statuses := c.statuses(ctx, clients)
	candidates := slices.DeleteFunc(statuses, func(s Status) bool { return s.Err != nil || s.Leader == 0 || s.Learner })
	if len(candidates) == 0 {
		return Snapshot{}, ErrNoMember
	}
	// Followers first, then by address, so the choice is stable.
	slices.SortStableFunc(candidates, func(a, b Status) int {
		return cmp.Compare(isLeader(a), isLeader(b))
	})
	from := candidates[0]
	resp, err := clients[from.Endpoint].SnapshotWithVersion(ctx)
	if err != nil {
		return Snapshot{}, fmt.Errorf("snapshot of %s: %w", from.Endpoint, err)
	}
	return Snapshot{ReadCloser: resp.Snapshot, Endpoint: from.Endpoint, Revision: from.Revision}, nil
}

func isLeader(s Status) int {
	if s.MemberID == s.Leader {
		return 1
	}
	return 0
}

// ErrSnapshotCorrupt is returned by a VerifyingReader whose stream does not
// end in the sha256 of what came before it.
var ErrSnapshotCorrupt = errors.New("etcd snapshot is corrupt: its trailing sha256 does not match its content")

// VerifyingReader passes a snapshot stream through unchanged and, at its
// end, checks it the way etcdutl checks a snapshot before restoring it: the
// database is a whole number of 512-byte blocks followed by its sha256.
// Instead of io.EOF it returns ErrSnapshotCorrupt when the check fails, so
// an upload reading from it fails rather than completes. It holds back
// nothing from its reader but the last sha256.Size bytes from its hash.
func VerifyingReader(r io.Reader) *SnapshotVerifier {
	return &SnapshotVerifier{r: r, hash: sha256.New()}
}

// SnapshotVerifier is the reader VerifyingReader returns.
type SnapshotVerifier struct {
	r    io.Reader
	hash hash.Hash
	// tail are the last bytes read, not hashed yet: they may be the trailer.
	tail []byte
	size int64
}

// Size is how many bytes were read, trailer included.
func (v *SnapshotVerifier) Size() int64 { return v.size }

func (v *SnapshotVerifier) Read(p []byte) (int, error) {
	n, err := v.r.Read(p)
	v.size += int64(n)
	v.keepTail(p[:n])
	if errors.Is(err, io.EOF) && !v.valid() {
		return n, ErrSnapshotCorrupt
	}
	return n, err
}

// keepTail hashes all but the last sha256.Size bytes seen.
func (v *SnapshotVerifier) keepTail(read []byte) {
	if len(read) >= sha256.Size {
		v.hash.Write(v.tail)
		v.hash.Write(read[:len(read)-sha256.Size])
		v.tail = append(v.tail[:0], read[len(read)-sha256.Size:]...)
		return
	}
	v.tail = append(v.tail, read...)
	if extra := len(v.tail) - sha256.Size; extra > 0 {
		v.hash.Write(v.tail[:extra])
		v.tail = append(v.tail[:0], v.tail[extra:]...)
	}
}

func (v *SnapshotVerifier) valid() bool {
	return v.size > sha256.Size && (v.size-sha256.Size)%512 == 0 && len(v.tail) == sha256.Size &&
		bytes.Equal(v.hash.Sum(nil), v.tail)
}
