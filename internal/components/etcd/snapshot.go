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

// Snapshot opens a snapshot stream from the member snapshotSource chooses,
// a follower when one is up to date, so that the leader keeps its resources
// for the cluster's writes. The stream is bounded by ctx alone, not by the
// call timeout: a large database takes long to send.
func (c *Checker) Snapshot(ctx context.Context, t Target) (Snapshot, error) {
	clients, err := c.clients(t)
	if err != nil {
		return Snapshot{}, err
	}
	from, ok := snapshotSource(c.statuses(ctx, clients))
	if !ok {
		return Snapshot{}, ErrNoMember
	}
	resp, err := clients[from.Endpoint].SnapshotWithVersion(ctx)
	if err != nil {
		return Snapshot{}, fmt.Errorf("snapshot of %s: %w", from.Endpoint, err)
	}
	return Snapshot{ReadCloser: resp.Snapshot, Endpoint: from.Endpoint, Revision: from.Revision}, nil
}

// snapshotSource is the member to take a snapshot from, of those whose
// statuses answered: one that knows a leader, is no learner and applied the
// newest revision any member reports (a follower that lags, as one did by
// hundreds of revisions under load, would store a snapshot without writes
// acknowledged before it was asked for), a follower when one did, and then
// by address, so the choice is stable.
func snapshotSource(statuses []Status) (Status, bool) {
	candidates := slices.DeleteFunc(statuses, func(s Status) bool { return s.Err != nil || s.Leader == 0 || s.Learner })
	if len(candidates) == 0 {
		return Status{}, false
	}
	newest := slices.MaxFunc(candidates, func(a, b Status) int { return cmp.Compare(a.Revision, b.Revision) }).Revision
	candidates = slices.DeleteFunc(candidates, func(s Status) bool { return s.Revision < newest })
	slices.SortStableFunc(candidates, func(a, b Status) int {
		return cmp.Compare(isLeader(a), isLeader(b))
	})
	return candidates[0], true
}

func isLeader(s Status) int {
	if s.MemberID == s.Leader {
		return 1
	}
	return 0
}
