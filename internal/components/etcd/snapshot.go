package etcd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
)

// Snapshot is a stream of one member's database as etcd sends it: the
// database, then the sha256 of the database (see package snapshotcheck).
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
