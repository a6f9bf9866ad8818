package encryption

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// PageSize is how many Secrets one Rewrite call lists and updates: a pass
// of the controller does one page, so a cluster with many Secrets is
// rewritten over several passes and holds no worker for long.
const PageSize = 200

// Progress is how far a rewrite of every Secret is.
type Progress struct {
	// Checked counts the Secrets updated unchanged so far.
	Checked int
	// Rewritten counts those of them the API server wrote again: those it
	// had read stale, in clear or under a key that is not the first.
	Rewritten int
	// Continue is where the next page starts; empty before the first page
	// and once the last one is done.
	Continue string
	// Done is true once every page is.
	Done bool
}

// Rewrite updates, unchanged, the next page of the workload cluster's
// Secrets after p. The API server writes again each one it read stale and
// leaves the others as they are, which the resourceVersion shows. A Secret
// changed or deleted meanwhile was written by an API server that encrypts,
// or is gone: either is done. A continue token that expired (etcd compacted
// past it) starts the rewrite over, which costs only reads for what is
// already done.
func Rewrite(ctx context.Context, c client.Client, p Progress) (Progress, error) {
	list := &corev1.SecretList{}
	err := c.List(ctx, list, client.Limit(PageSize), client.Continue(p.Continue))
	if apierrors.IsResourceExpired(err) {
		return Progress{}, nil
	}
	if err != nil {
		return p, fmt.Errorf("list the workload cluster's Secrets: %w", err)
	}
	for i := range list.Items {
		s := &list.Items[i]
		was := s.ResourceVersion
		err := c.Update(ctx, s)
		switch {
		case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		case err != nil:
			return p, fmt.Errorf("update Secret %s/%s unchanged: %w", s.Namespace, s.Name, err)
		case s.ResourceVersion != was:
			p.Rewritten++
		}
		p.Checked++
	}
	p.Continue = list.Continue
	p.Done = list.Continue == ""
	return p, nil
}
