package topology

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	runtimehooksv1 "sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1"
)

// validate runs ValidateTopology on the sample template patched with values
// (as Cluster API sends it, after the patches) and returns its message.
func validate(t *testing.T, h *Handlers, template []byte, values map[string]any) (runtimehooksv1.ResponseStatus, string) {
	t.Helper()
	req := &runtimehooksv1.ValidateTopologyRequest{
		Variables: variables(t, values),
		Items: []*runtimehooksv1.ValidateTopologyRequestItem{
			{HolderReference: holder("spec.infrastructureRef"), Object: runtime.RawExtension{Raw: []byte(infraTemplate)}},
			{HolderReference: holder("spec.controlPlaneRef"), Object: runtime.RawExtension{Raw: template}},
		},
	}
	resp := &runtimehooksv1.ValidateTopologyResponse{}
	h.ValidateTopology(context.Background(), req, resp)
	return resp.Status, resp.Message
}

// patched is the sample template after GeneratePatches applied values.
func patched(t *testing.T, h *Handlers, values map[string]any) []byte {
	t.Helper()
	controlPlane, _ := generate(t, h, values)
	return applyPatch(t, sampleTemplate(t), controlPlane)
}

// Impossible combinations are rejected with a message that names the
// variable to change, the same message every time.
func TestValidateTopologyRejectsImpossibleCombinations(t *testing.T) {
	capi := types.NamespacedName{Namespace: "capi-system", Name: "capi"}
	noWildcard := withHostname(passthroughGateway(types.NamespacedName{Namespace: "edge", Name: "exact"}), "api.example.com")
	h := handlers(t, passthroughGateway(capi), noWildcard)
	for _, tc := range []struct {
		name   string
		values map[string]any
		want   string
	}{
		{
			"even etcd replicas",
			map[string]any{VarEtcdReplicas: 4},
			`spec.topology.variables[etcdReplicas]: Invalid value: 4: must be odd: 4 etcd members tolerate no more failures than 3, and need more of them for a quorum; use 1, 3 or 5`,
		},
		{
			"gateway namespace without a name",
			map[string]any{VarGatewayNamespace: "edge"},
			`spec.topology.variables[gatewayNamespace]: Invalid value: "edge": names the namespace of a Gateway, but gatewayName is not set: set gatewayName too, or remove gatewayNamespace`,
		},
		{
			"a gateway that does not exist",
			map[string]any{VarGatewayName: "missing", VarGatewayNamespace: "edge"},
			`spec.topology.variables[gatewayName]: Invalid value: "edge/missing": no Gateway edge/missing exists`,
		},
		{
			"a gateway without a wildcard TLS passthrough listener",
			map[string]any{VarGatewayName: "exact", VarGatewayNamespace: "edge"},
			`spec.topology.variables[gatewayName]: Invalid value: "edge/exact": the Gateway edge/exact has no listener with protocol TLS, tls.mode Passthrough and a wildcard hostname such as *.k8s.example.com`,
		},
		{
			"a cert SAN that is neither a DNS name nor an IP",
			map[string]any{VarCertSANs: []string{"api.example.com", "not a name!"}},
			`spec.topology.variables[certSANs][1]: Invalid value: "not a name!": must be a DNS name (for example api.example.com or *.example.com) or an IP address`,
		},
		{
			"a cert SAN twice",
			map[string]any{VarCertSANs: []string{"api.example.com", "api.example.com"}},
			`spec.topology.variables[certSANs][1]: Duplicate value: "api.example.com"`,
		},
		{
			"a backup schedule that is not cron",
			map[string]any{VarEtcdBackup: map[string]any{"schedule": "nightly", "secretName": "s3"}},
			`spec.topology.variables[etcdBackup].schedule: Invalid value: "nightly": must be a cron schedule with five fields (for example "0 3 * * *") or a descriptor such as @daily: expected exactly 5 fields, found 1: [nightly]`,
		},
		{
			"an empty etcd volume",
			map[string]any{VarEtcdVolumeSize: "0"},
			`spec.topology.variables[etcdVolumeSize]: Invalid value: "0": must be at least 1Gi: beside its database etcd keeps its write-ahead log (about 512Mi) and the copy a defragmentation writes`,
		},
		{
			"an etcd volume beyond any use",
			map[string]any{VarEtcdVolumeSize: "2Ti"},
			`spec.topology.variables[etcdVolumeSize]: Invalid value: "2Ti": must be at most 1Ti: etcd keeps its database within a few GiB (8Gi is the most its quota should be), so a larger volume only wastes storage`,
		},
		{
			"several problems, in a fixed order",
			map[string]any{VarEtcdReplicas: 2, VarCertSANs: []string{"-bad-"}},
			`[spec.topology.variables[etcdReplicas]: Invalid value: 2: must be odd: 2 etcd members tolerate no more failures than 1, and need more of them for a quorum; use 1, 3 or 5, ` +
				`spec.topology.variables[certSANs][0]: Invalid value: "-bad-": must be a DNS name (for example api.example.com or *.example.com) or an IP address]`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, msg := validate(t, h, patched(t, h, tc.values), tc.values)
			assert.Equal(t, runtimehooksv1.ResponseStatusFailure, status)
			assert.Equal(t, tc.want, msg)
		})
	}
}

// A problem the template itself carries names the template's field, not a
// variable the user did not set.
func TestValidateTopologyNamesTemplateFields(t *testing.T) {
	h := handlers(t)
	template := applyPatch(t, sampleTemplate(t), `[{"op":"add","path":"/spec/template/spec/exposure","value":{"type":"NodePort"}}]`)
	status, msg := validate(t, h, template, map[string]any{})
	assert.Equal(t, runtimehooksv1.ResponseStatusFailure, status)
	assert.Equal(t, `[spec.template.spec.exposure: Forbidden: exposure applies only without a gateway; set either spec.gateway or spec.exposure, not both, `+
		`spec.template.spec.gateway: Invalid value: "capi-system/capi": no Gateway capi-system/capi exists]`, msg)
}

// Rules on what no variable sets (args the controller owns, image
// references) name the template's field.
func TestValidateTopologyNamesTemplateArgsAndImages(t *testing.T) {
	h := handlers(t, passthroughGateway(types.NamespacedName{Namespace: "capi-system", Name: "capi"}))
	template := applyPatch(t, sampleTemplate(t), `[{"op":"add","path":"/spec/template/spec/etcd","value":{
		"args":{"initial-cluster":"x","quota-backend-bytes":"8589934592"},"image":{"registry":"https://mirror.example.com"}}}]`)
	status, msg := validate(t, h, template, map[string]any{VarEtcdVolumeSize: "8Gi"})
	assert.Equal(t, runtimehooksv1.ResponseStatusFailure, status)
	assert.Equal(t, `[spec.template.spec.etcd.image.registry: Invalid value: "https://mirror.example.com": must be a registry host with an optional port and path, `+
		`such as registry.example.com, registry.example.com:5000 or registry.example.com/mirror, without a scheme or a trailing "/", `+
		`spec.template.spec.etcd.args[initial-cluster]: Forbidden: set by the controller (it defines the etcd cluster's membership, which the controller manages); remove it]`, msg)
}

func TestValidateTopologyAcceptsAWorkableTopology(t *testing.T) {
	h := handlers(t, passthroughGateway(types.NamespacedName{Namespace: "capi-system", Name: "capi"}))
	values := map[string]any{
		VarControlPlaneReplicas: 3, VarCertSANs: []string{"api.example.com", "192.0.2.10", "*.apps.example.com"},
		VarEtcdReplicas: 5, VarEtcdVolumeSize: "8Gi", VarEtcdBackup: map[string]any{"schedule": "@daily", "secretName": "s3"},
	}
	status, msg := validate(t, h, patched(t, h, values), values)
	assert.Equal(t, runtimehooksv1.ResponseStatusSuccess, status, msg)
}

// A name that the Gateway would give the API server must be a DNS name.
func TestValidateTopologyRejectsTooLongEndpointNames(t *testing.T) {
	long := passthroughGateway(types.NamespacedName{Namespace: "capi-system", Name: "capi"})
	label := strings.Repeat("a", 60)
	long = withHostname(long, "*."+strings.Join([]string{label, label, label, label}, ".")) // 243 characters: valid, but not with a prefix
	h := handlers(t, long)
	status, msg := validate(t, h, sampleTemplate(t), map[string]any{})
	assert.Equal(t, runtimehooksv1.ResponseStatusFailure, status)
	assert.Contains(t, msg, `spec.template.spec.gateway: Invalid value: "capi-system/capi": gives the API server the name "demo.team-a.aaa`)
	assert.Contains(t, msg, "use a shorter Cluster name, namespace or Gateway hostname")
}

// A backup schedule that runs more often than the platform's minimum, or
// never, is refused as the controller's admission would, naming the
// variable.
func TestValidateTopologyHoldsBackupSchedulesToTheMinimum(t *testing.T) {
	h := handlers(t, passthroughGateway(types.NamespacedName{Namespace: "capi-system", Name: "capi"}))
	h.MinBackupInterval = time.Hour
	for schedule, want := range map[string]string{
		"*/10 * * * *": `spec.topology.variables[etcdBackup].schedule: Invalid value: "*/10 * * * *": runs as often as every 10m, ` +
			`and the platform allows a snapshot of a control plane at most every 1h (MIN_BACKUP_INTERVAL)`,
		"@every 0s":  `spec.topology.variables[etcdBackup].schedule: Invalid value: "@every 0s": @every needs a positive interval`,
		"0 3 31 2 *": `spec.topology.variables[etcdBackup].schedule: Invalid value: "0 3 31 2 *": never runs`,
	} {
		values := map[string]any{VarEtcdBackup: map[string]any{"schedule": schedule, "secretName": "s3"}}
		status, msg := validate(t, h, patched(t, h, values), values)
		assert.Equal(t, runtimehooksv1.ResponseStatusFailure, status, schedule)
		assert.Contains(t, msg, want)
	}
	values := map[string]any{VarEtcdBackup: map[string]any{"schedule": "@hourly", "secretName": "s3"}}
	status, msg := validate(t, h, patched(t, h, values), values)
	assert.Equal(t, runtimehooksv1.ResponseStatusSuccess, status, msg)
}
