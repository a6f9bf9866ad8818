package topology

import (
	"context"
	"errors"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
	"sigs.k8s.io/cluster-api/exp/runtime/topologymutation"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

// Holder field paths of the templates Cluster API sends.
const (
	infrastructureHolder = "spec.infrastructureRef"
	controlPlaneHolder   = "spec.controlPlaneRef"
)

// Handlers serve the topology mutation hooks.
type Handlers struct {
	// Reader reads Gateways; the manager's cached client suits it.
	Reader client.Reader
	// MinBackupInterval is the platform's MIN_BACKUP_INTERVAL, which the
	// controller's admission enforces too; zero allows any schedule that runs.
	MinBackupInterval time.Duration
	decoder           runtime.Decoder
}

// NewHandlers returns the topology mutation hooks, reading Gateways with r.
func NewHandlers(r client.Reader) *Handlers {
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		panic(err) // a fixed, known scheme
	}
	return &Handlers{Reader: r, decoder: templateDecoder{typed: serializer.NewCodecFactory(scheme).UniversalDeserializer()}}
}

// DiscoverVariables publishes the variables.
func (h *Handlers) DiscoverVariables(_ context.Context, _ *runtimehooksv1.DiscoverVariablesRequest, resp *runtimehooksv1.DiscoverVariablesResponse) {
	resp.Variables = Variables()
	resp.SetStatus(runtimehooksv1.ResponseStatusSuccess)
}

// GeneratePatches applies the variables to the HostedControlPlaneTemplate
// and the gateway's endpoint to the infrastructure cluster template. A
// Gateway that cannot be used leaves the endpoint alone: ValidateTopology
// reports it.
func (h *Handlers) GeneratePatches(ctx context.Context, req *runtimehooksv1.GeneratePatchesRequest, resp *runtimehooksv1.GeneratePatchesResponse) {
	log := ctrl.LoggerFrom(ctx)
	in, err := h.readRequest(req.Variables, templateItems(req))
	if err != nil {
		fail(resp, err)
		return
	}
	endpoint, err := h.endpoint(ctx, in)
	var gwErr *GatewayError
	switch {
	case errors.As(err, &gwErr):
		log.Info("Not setting the control plane endpoint", "cluster", in.cluster, "reason", gwErr.Reason)
	case err != nil:
		fail(resp, err)
		return
	}
	topologymutation.WalkTemplates(ctx, h.decoder, req, resp,
		func(_ context.Context, obj runtime.Object, vars map[string]apiextensionsv1.JSON, holder runtimehooksv1.HolderReference) error {
			switch t := obj.(type) {
			case *v1alpha1.HostedControlPlaneTemplate:
				if err := replicasTakeEffect(t, in.values, vars); err != nil {
					return err
				}
				in.values.Apply(&t.Spec.Template.Spec.ControlPlaneSettings, in.cluster.Namespace)
			case *unstructured.Unstructured:
				if endpoint == nil || holder.Kind != "Cluster" || holder.FieldPath != infrastructureHolder {
					return nil
				}
				if _, err := SetEndpoint(t, *endpoint); err != nil {
					return fmt.Errorf("set the control plane endpoint: %w", err)
				}
			}
			return nil
		})
}

// replicasTakeEffect refuses the controlPlaneReplicas variable where Cluster
// API would silently ignore it: it keeps a control plane's replicas from the
// Cluster's topology, or else from the unpatched template, when either sets
// them.
func replicasTakeEffect(t *v1alpha1.HostedControlPlaneTemplate, v Values, vars map[string]apiextensionsv1.JSON) error {
	if v.ControlPlaneReplicas == nil {
		return nil
	}
	_, err := topologymutation.GetVariable(vars, "builtin.controlPlane.replicas")
	switch {
	case err == nil:
		return fmt.Errorf("variable %s cannot take effect: Cluster API keeps the control plane's replicas from "+
			"Cluster.spec.topology.controlPlane.replicas, which is set; set only one of them", VarControlPlaneReplicas)
	case !topologymutation.IsNotFoundError(err):
		return fmt.Errorf("variable builtin.controlPlane.replicas: %w", err)
	case t.Spec.Template.Spec.Replicas != nil:
		return fmt.Errorf("variable %s cannot take effect: Cluster API keeps the control plane's replicas from "+
			"HostedControlPlaneTemplate %s/%s, which sets spec.template.spec.replicas; remove them from the template",
			VarControlPlaneReplicas, t.Namespace, t.Name)
	}
	return nil
}

// request is what a topology hook reads from its request.
type request struct {
	cluster types.NamespacedName
	values  Values
	// template is the HostedControlPlaneTemplate, when the control plane is
	// one of ours.
	template *v1alpha1.HostedControlPlaneTemplate
}

type item struct {
	holder runtimehooksv1.HolderReference
	raw    []byte
}

func templateItems(req *runtimehooksv1.GeneratePatchesRequest) []item {
	items := make([]item, 0, len(req.Items))
	for _, i := range req.Items {
		items = append(items, item{holder: i.HolderReference, raw: i.Object.Raw})
	}
	return items
}

func (h *Handlers) readRequest(vars []runtimehooksv1.Variable, items []item) (request, error) {
	all := topologymutation.ToMap(vars)
	name, err := topologymutation.GetStringVariable(all, "builtin.cluster.name")
	if err != nil {
		return request{}, fmt.Errorf("variable builtin.cluster.name: %w", err)
	}
	namespace, err := topologymutation.GetStringVariable(all, "builtin.cluster.namespace")
	if err != nil {
		return request{}, fmt.Errorf("variable builtin.cluster.namespace: %w", err)
	}
	in := request{cluster: types.NamespacedName{Namespace: namespace, Name: name}}
	if in.values, err = ParseValues(all); err != nil {
		return request{}, err
	}
	for _, i := range items {
		if i.holder.FieldPath != controlPlaneHolder {
			continue
		}
		obj, _, err := h.decoder.Decode(i.raw, nil, nil)
		if err != nil {
			return request{}, fmt.Errorf("decode the control plane template: %w", err)
		}
		in.template, _ = obj.(*v1alpha1.HostedControlPlaneTemplate)
	}
	return in, nil
}

// gateway is the Gateway that serves the control plane: the variables', or
// else the template's.
func (in request) gateway() *v1alpha1.GatewayReference {
	if gw := in.values.Gateway(in.cluster.Namespace); gw != nil {
		return gw
	}
	if in.template != nil {
		return in.template.Spec.Template.Spec.Gateway
	}
	return nil
}

// endpoint is the control plane endpoint the Gateway gives the cluster, or
// nil when no Gateway serves it.
func (h *Handlers) endpoint(ctx context.Context, in request) (*clusterv1.APIEndpoint, error) {
	gw := in.gateway()
	if in.template == nil || gw == nil || gw.Name == "" {
		return nil, nil
	}
	listener, err := ResolveGateway(ctx, h.Reader, types.NamespacedName{Namespace: gw.Namespace, Name: gw.Name})
	if err != nil {
		return nil, err
	}
	ep := listener.Endpoint(in.cluster.Name, in.cluster.Namespace)
	return &ep, nil
}

func fail(resp runtimehooksv1.ResponseObject, err error) {
	resp.SetStatus(runtimehooksv1.ResponseStatusFailure)
	resp.SetMessage(err.Error())
}

// templateDecoder decodes HostedControlPlaneTemplates into their type and
// every other template, such as an infrastructure cluster template of any
// provider, into Unstructured.
type templateDecoder struct{ typed runtime.Decoder }

func (d templateDecoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	obj, gvk, err := d.typed.Decode(data, defaults, into)
	if runtime.IsNotRegisteredError(err) {
		return unstructured.UnstructuredJSONScheme.Decode(data, defaults, into)
	}
	return obj, gvk, err
}
