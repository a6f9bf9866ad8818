package refgrant

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/utils/ptr"
	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"
)

func TestAllows(t *testing.T) {
	hcps := gatewayv1beta1.ReferenceGrantFrom{Group: "controlplane.cluster.x-k8s.io", Kind: "HostedControlPlane", Namespace: "tenant-a"}
	secret := refgrantTo("", "Secret", "s3")
	anySecret := refgrantTo("", "Secret", "")
	s3 := Target{Kind: "Secret", Namespace: "capi-system", Name: "s3"}
	for _, tc := range []struct {
		name string
		from []gatewayv1beta1.ReferenceGrantFrom
		to   []gatewayv1beta1.ReferenceGrantTo
		ns   string
		want bool
	}{
		{"the Secret by name", []gatewayv1beta1.ReferenceGrantFrom{hcps}, []gatewayv1beta1.ReferenceGrantTo{secret}, "tenant-a", true},
		{"every Secret", []gatewayv1beta1.ReferenceGrantFrom{hcps}, []gatewayv1beta1.ReferenceGrantTo{anySecret}, "tenant-a", true},
		{"another namespace's control planes", []gatewayv1beta1.ReferenceGrantFrom{hcps}, []gatewayv1beta1.ReferenceGrantTo{secret}, "tenant-b", false},
		{"another Secret", []gatewayv1beta1.ReferenceGrantFrom{hcps}, []gatewayv1beta1.ReferenceGrantTo{refgrantTo("", "Secret", "other")}, "tenant-a", false},
		{"another kind", []gatewayv1beta1.ReferenceGrantFrom{hcps}, []gatewayv1beta1.ReferenceGrantTo{refgrantTo("", "ConfigMap", "s3")}, "tenant-a", false},
		{"another group", []gatewayv1beta1.ReferenceGrantFrom{hcps}, []gatewayv1beta1.ReferenceGrantTo{refgrantTo("example.com", "Secret", "s3")}, "tenant-a", false},
		{
			"routes, not control planes",
			[]gatewayv1beta1.ReferenceGrantFrom{{Group: "gateway.networking.k8s.io", Kind: "TLSRoute", Namespace: "tenant-a"}},
			[]gatewayv1beta1.ReferenceGrantTo{secret},
			"tenant-a", false,
		},
		{
			"one of several entries",
			[]gatewayv1beta1.ReferenceGrantFrom{{Group: "gateway.networking.k8s.io", Kind: "TLSRoute", Namespace: "tenant-a"}, hcps},
			[]gatewayv1beta1.ReferenceGrantTo{refgrantTo("", "ConfigMap", ""), secret},
			"tenant-a", true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := &gatewayv1beta1.ReferenceGrantSpec{From: tc.from, To: tc.to}
			assert.Equal(t, tc.want, allows(spec, tc.ns, s3))
		})
	}
}

func refgrantTo(group, kind, name string) gatewayv1beta1.ReferenceGrantTo {
	to := gatewayv1beta1.ReferenceGrantTo{Group: gatewayv1beta1.Group(group), Kind: gatewayv1beta1.Kind(kind)}
	if name != "" {
		to.Name = ptr.To(gatewayv1beta1.ObjectName(name))
	}
	return to
}
