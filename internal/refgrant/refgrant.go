package refgrant

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=referencegrants,verbs=list

// fromKind is the kind whose references this package checks.
const fromKind = "HostedControlPlane"

// Target is an object a HostedControlPlane refers to.
type Target struct {
	// Group is the object's API group, "" for the core group.
	Group string
	Kind  string
	// Namespace and Name of the object.
	Namespace, Name string
}

// ErrNotPermitted is what Check's error wraps when no grant allows the
// reference, or grants cannot exist in the management cluster.
var ErrNotPermitted = errors.New("reference not permitted")

// notPermitted says which grant is missing, naming the object and never
// reading it.
type notPermitted struct {
	from   string
	target Target
	noCRD  bool
}

func (e *notPermitted) Error() string {
	if e.noCRD {
		return fmt.Sprintf("%s %s/%s is in another namespace, and references to other namespaces need Gateway API's ReferenceGrant "+
			"(gateway.networking.k8s.io/v1beta1), whose CRD is not installed in the management cluster", e.target.Kind, e.target.Namespace, e.target.Name)
	}
	return fmt.Sprintf("%s %s/%s is in another namespace, and no ReferenceGrant there allows HostedControlPlanes of namespace %s to use it: "+
		"the owner of namespace %s grants it with a ReferenceGrant whose from has group %s, kind %s, namespace %s and whose to has group %q, kind %s (name %s, or none for every one)",
		e.target.Kind, e.target.Namespace, e.target.Name, e.from, e.target.Namespace,
		v1alpha1.GroupVersion.Group, fromKind, e.from, e.target.Group, e.target.Kind, e.target.Name)
}

func (e *notPermitted) Unwrap() error { return ErrNotPermitted }

// Check returns nil when HostedControlPlanes of namespace from may use
// target: it is in the same namespace, or a ReferenceGrant in target's
// namespace allows it. Otherwise its error wraps ErrNotPermitted and says
// which grant is missing; any other error means the grants could not be
// read, and the reference is not to be used either.
func Check(ctx context.Context, r client.Reader, from string, target Target) error {
	if target.Namespace == from {
		return nil
	}
	grants := &gatewayv1beta1.ReferenceGrantList{}
	if err := r.List(ctx, grants, client.InNamespace(target.Namespace)); err != nil {
		if meta.IsNoMatchError(err) {
			return &notPermitted{from: from, target: target, noCRD: true}
		}
		return fmt.Errorf("read the ReferenceGrants of namespace %s: %w", target.Namespace, err)
	}
	for i := range grants.Items {
		if allows(&grants.Items[i].Spec, from, target) {
			return nil
		}
	}
	return &notPermitted{from: from, target: target}
}

// allows is whether one grant lets HostedControlPlanes of namespace from
// use target, as Gateway API defines it: one of its from entries names
// them and one of its to entries names target's kind, and the target's
// name when it names one.
func allows(spec *gatewayv1beta1.ReferenceGrantSpec, from string, target Target) bool {
	fromOK := false
	for _, f := range spec.From {
		if string(f.Group) == v1alpha1.GroupVersion.Group && string(f.Kind) == fromKind && string(f.Namespace) == from {
			fromOK = true
			break
		}
	}
	if !fromOK {
		return false
	}
	for _, t := range spec.To {
		if string(t.Group) == target.Group && string(t.Kind) == target.Kind && (t.Name == nil || string(*t.Name) == target.Name) {
			return true
		}
	}
	return false
}
