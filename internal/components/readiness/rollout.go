package readiness

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

// DeploymentProgress tells whether a Deployment runs its current spec on
// every replica: all updated and available, none of an old revision left.
// Otherwise it says how far it is.
func DeploymentProgress(d *appsv1.Deployment) (bool, string) {
	want, st := ptr.Deref(d.Spec.Replicas, 1), d.Status
	if st.ObservedGeneration < d.Generation || st.UpdatedReplicas != want || st.AvailableReplicas != want || st.Replicas != want {
		return false, fmt.Sprintf("%d of %d available, %d up to date", st.AvailableReplicas, want, st.UpdatedReplicas)
	}
	return true, ""
}

// DaemonSetProgress tells whether a DaemonSet runs its current spec on every
// node it should. Otherwise it says how far it is.
func DaemonSetProgress(ds *appsv1.DaemonSet) (bool, string) {
	st := ds.Status
	if st.ObservedGeneration < ds.Generation || st.UpdatedNumberScheduled != st.DesiredNumberScheduled || st.NumberAvailable != st.DesiredNumberScheduled {
		return false, fmt.Sprintf("%d of %d nodes available, %d up to date", st.NumberAvailable, st.DesiredNumberScheduled, st.UpdatedNumberScheduled)
	}
	return true, ""
}

// RolledOut is done when every Deployment and DaemonSet among objs, read
// through c, has rolled out. name is how the messages call an object.
func RolledOut(ctx context.Context, c client.Reader, objs []client.Object, name func(client.Object) string) (Outcome, error) {
	var progress, names []string
	for _, obj := range objs {
		var done bool
		var how string
		var err error
		switch obj.(type) {
		case *appsv1.Deployment:
			d := &appsv1.Deployment{}
			if err = c.Get(ctx, client.ObjectKeyFromObject(obj), d); err == nil {
				done, how = DeploymentProgress(d)
			}
		case *appsv1.DaemonSet:
			ds := &appsv1.DaemonSet{}
			if err = c.Get(ctx, client.ObjectKeyFromObject(obj), ds); err == nil {
				done, how = DaemonSetProgress(ds)
			}
		default:
			continue
		}
		switch {
		case apierrors.IsNotFound(err):
			// Just created: c, a cache, has not seen it yet; its watch
			// brings the next pass.
			how = "created, not observed yet"
		case err != nil:
			return Outcome{}, err
		}
		if !done {
			progress = append(progress, name(obj)+": "+how)
		}
		names = append(names, name(obj))
	}
	if len(progress) > 0 {
		return Waiting(v1alpha1.ProgressingReason, "%s", strings.Join(progress, "; ")), nil
	}
	return Ready(strings.Join(names, ", ") + " rolled out"), nil
}

// KindName names an object by its kind and name: "Deployment coredns".
func KindName(obj client.Object) string {
	return obj.GetObjectKind().GroupVersionKind().Kind + " " + obj.GetName()
}
