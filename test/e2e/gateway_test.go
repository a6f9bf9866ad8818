package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/test/slots"
	"github.com/hostedcp/cluster-api-provider-hosted/tools/localcluster/cluster"
	"github.com/hostedcp/cluster-api-provider-hosted/tools/localcluster/images"
	"github.com/hostedcp/cluster-api-provider-hosted/tools/localcluster/provider"
)

// gatewayCluster is hostedCluster with one API server and one etcd member,
// served through the Gateway namespace/gateway, as the manifests users
// already have write it.
func gatewayCluster(name, gateway, namespace string) string {
	return hostedCluster(name, images.KubeVersion, 1, 1) + fmt.Sprintf("  gateway: {name: %s, namespace: %s}\n", gateway, namespace)
}

// gatewayHost is where a Cluster's API server is served through a listener
// on *.cluster.GatewayDomain.
func gatewayHost(ns, name string) string { return name + "." + ns + "." + cluster.GatewayDomain }

// Two Clusters of the seed manifests' shape (spec.gateway naming
// capi/capi-system, a Cluster with controlPlaneRef) become Available
// through the one Gateway Traefik serves: each kubeconfig names its
// cluster's gateway hostname on port 443 and reaches that cluster's own API
// server from the host, no LoadBalancer Service is made for either, and a
// client certificate of one is refused by the other. The first names its
// endpoint as spec.serviceAccountIssuer, whose discovery document and keys
// anyone reads there (see issuerDiscovered). Then the Gateway is
// deleted under them: ExposureReady and a Warning event say so, and both
// recover once it is back. It runs in parallel with the tests that do not
// use the shared Gateway.
func TestGatewaySharedByTwoClusters(t *testing.T) {
	parallel(t, slots.Changes(sharedGateway))
	nsA, nsB := namespace(t, "gateway-a"), namespace(t, "gateway-b")
	const nameA, nameB = "seed", "other"
	issuer := "https://" + gatewayHost(nsA, nameA)
	apply(t, nsA, gatewayCluster(nameA, provider.GatewayName, provider.GatewayNamespace)+"  serviceAccountIssuer: "+issuer+"\n")
	apply(t, nsB, gatewayCluster(nameB, provider.GatewayName, provider.GatewayNamespace))
	keyA, keyB := client.ObjectKey{Namespace: nsA, Name: nameA}, client.ObjectKey{Namespace: nsB, Name: nameB}
	restarts := podRestarts(t)
	start := time.Now()
	for _, key := range []client.ObjectKey{keyA, keyB} {
		require.NoError(t, waitAvailable(t, key, 15*time.Minute))
	}
	t.Logf("both Available %s after their Clusters were created", time.Since(start).Round(time.Second))

	t.Run("the seed manifest's shape is served at its gateway hostname on port 443", func(t *testing.T) {
		for _, key := range []client.ObjectKey{keyA, keyB} {
			hcp := &v1alpha1.HostedControlPlane{}
			require.NoError(t, k8s.Get(testContext(t), key, hcp))
			host := gatewayHost(key.Namespace, key.Name)
			assert.Equal(t, host, hcp.Spec.ControlPlaneEndpoint.Host)
			assert.Equal(t, int32(443), hcp.Spec.ControlPlaneEndpoint.Port)
			cfg := hostedConfig(t, key.Namespace, key.Name)
			assert.Equal(t, "https://"+host+":443", cfg.Host, "the kubeconfig of %s", key)
			assertRoutesAccepted(t, key)
			services := &corev1.ServiceList{}
			require.NoError(t, k8s.List(testContext(t), services, client.InNamespace(key.Namespace)))
			for _, svc := range services.Items {
				assert.NotEqual(t, corev1.ServiceTypeLoadBalancer, svc.Spec.Type, "Service %s: no load balancer per tenant", svc.Name)
			}
		}
	})

	t.Run("the hostnames resolve to the Gateway through the DNS the host and workers ask, which answers nothing else", func(t *testing.T) {
		ctx := testContext(t)
		for _, name := range []string{gatewayHost(nsA, nameA), "konnectivity." + gatewayHost(nsB, nameB)} {
			addrs, err := cluster.Resolver.LookupHost(ctx, name)
			require.NoError(t, err)
			assert.Equal(t, []string{cluster.GatewayAddress}, addrs, name)
		}
		_, err := cluster.Resolver.LookupHost(ctx, "kubernetes.default.svc.cluster.local")
		assert.Error(t, err, "the management cluster's own names stay inside it")
	})

	t.Run("Cluster API reaches each API server through its gateway hostname", func(t *testing.T) {
		// Its manager, a pod, resolves the name through cluster DNS.
		for _, key := range []client.ObjectKey{keyA, keyB} {
			eventually(t, 2*time.Minute, "Cluster "+key.String()+" RemoteConnectionProbe", func() error {
				c := &clusterv1.Cluster{}
				if err := k8s.Get(testContext(t), key, c); err != nil {
					return err
				}
				if !apimeta.IsStatusConditionTrue(c.Status.Conditions, clusterv1.ClusterRemoteConnectionProbeCondition) {
					return fmt.Errorf("%+v", apimeta.FindStatusCondition(c.Status.Conditions, clusterv1.ClusterRemoteConnectionProbeCondition))
				}
				return nil
			})
		}
	})

	t.Run("each kubeconfig reaches its own API server from the host", func(t *testing.T) {
		seen := map[string]string{}
		for _, key := range []client.ObjectKey{keyA, keyB} {
			hosted, err := kubernetes.NewForConfig(hostedConfig(t, key.Namespace, key.Name))
			require.NoError(t, err)
			version, err := hosted.Discovery().ServerVersion()
			require.NoError(t, err)
			assert.Equal(t, images.KubeVersion, version.GitVersion)
			ctx := testContext(t)
			_, err = hosted.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: "written-through-the-gateway"}, Data: map[string]string{"cluster": key.String()},
			}, metav1.CreateOptions{})
			require.NoError(t, err, "a client of %s creates a ConfigMap", key)
			// Each cluster holds only its own: the other's create did not land here.
			got, err := hosted.CoreV1().ConfigMaps("default").Get(ctx, "written-through-the-gateway", metav1.GetOptions{})
			require.NoError(t, err)
			assert.Equal(t, key.String(), got.Data["cluster"])
			system, err := hosted.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{})
			require.NoError(t, err)
			seen[string(system.UID)] = key.String()
		}
		assert.Len(t, seen, 2, "two API servers with etcds of their own answered")
	})

	t.Run("a client certificate of one cluster is refused by the other", func(t *testing.T) {
		a, b := hostedConfig(t, nsA, nameA), hostedConfig(t, nsB, nameB)
		crossed := rest.CopyConfig(b)
		crossed.CertData, crossed.KeyData = a.CertData, a.KeyData
		hosted, err := kubernetes.NewForConfig(crossed)
		require.NoError(t, err)
		_, err = hosted.CoreV1().Namespaces().List(testContext(t), metav1.ListOptions{})
		require.Error(t, err, "%s's API server accepts a client certificate of %s", keyB, keyA)
		assert.True(t, apierrors.IsUnauthorized(err), "refused as unauthorized: %v", err)
	})

	t.Run("the service account issuer's discovery document and keys are served anonymously at the endpoint, and nothing else", func(t *testing.T) {
		issuerDiscovered(t, keyA, issuer, keyB)
	})

	t.Run("a deleted Gateway shows in ExposureReady and Available, and both clusters recover once it is back", func(t *testing.T) {
		gw := &gatewayv1.Gateway{}
		gwKey := client.ObjectKey{Namespace: provider.GatewayNamespace, Name: provider.GatewayName}
		require.NoError(t, k8s.Get(testContext(t), gwKey, gw))
		saved := gw.DeepCopy()
		deleted := time.Now()
		require.NoError(t, k8s.Delete(testContext(t), gw))
		t.Cleanup(func() { restoreGateway(t, saved) })
		for _, key := range []client.ObjectKey{keyA, keyB} {
			c := waitCondition(t, key, v1alpha1.ExposureReadyCondition, metav1.ConditionFalse, v1alpha1.GatewayNotFoundReason)
			t.Logf("%s: ExposureReady %s %s after the Gateway was deleted: %s", key, c.Reason, time.Since(deleted).Round(time.Second), c.Message)
			assert.Contains(t, c.Message, "Gateway capi-system/capi does not exist")
			assertWarning(t, key, v1alpha1.GatewayNotFoundReason)
			c = waitCondition(t, key, v1alpha1.AvailableCondition, metav1.ConditionFalse, v1alpha1.NotAnsweringReason)
			t.Logf("%s: Available %s %s after the Gateway was deleted: %s", key, c.Reason, time.Since(deleted).Round(time.Second), c.Message)
		}
		recreated := time.Now()
		restoreGateway(t, saved)
		for _, key := range []client.ObjectKey{keyA, keyB} {
			waitCondition(t, key, v1alpha1.ExposureReadyCondition, metav1.ConditionTrue, v1alpha1.ReadyReason)
			waitCondition(t, key, v1alpha1.AvailableCondition, metav1.ConditionTrue, v1alpha1.ReadyReason)
			t.Logf("%s: Available again %s after the Gateway was re-created", key, time.Since(recreated).Round(time.Second))
			hosted, err := kubernetes.NewForConfig(hostedConfig(t, key.Namespace, key.Name))
			require.NoError(t, err)
			_, err = hosted.Discovery().ServerVersion()
			require.NoError(t, err, "%s answers through the Gateway again", key)
		}
	})

	t.Run("nothing crashed", func(t *testing.T) { assertNoRestarts(t, restarts) })

	t.Run("deleting the Clusters removes their routes", func(t *testing.T) {
		deleteClusters(t, keyA, keyB)
	})
}

// A control plane behind a Gateway that cannot serve it says why in
// ExposureReady and a Warning event, and becomes Available once the
// Gateway is fixed: first the Gateway has no wildcard TLS passthrough
// listener, then its listener admits no route from the control plane's
// namespace (Traefik rejects the routes as NotAllowedByListeners), then
// the namespace gets the label the listener asks for.
func TestGatewayProblemsAndRecovery(t *testing.T) {
	parallel(t)
	ns := namespace(t, "gateway-problems")
	const name, gatewayName = "fixed", "edge"
	key := client.ObjectKey{Namespace: ns, Name: name}
	restarts := podRestarts(t)
	apply(t, ns, fmt.Sprintf(`apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: %s}
spec:
  gatewayClassName: traefik
  listeners:
  - name: tls
    protocol: TLS
    port: 443
    hostname: api.%s
    tls: {mode: Passthrough}
`, gatewayName, cluster.GatewayDomain))
	apply(t, ns, gatewayCluster(name, gatewayName, ns))

	t.Run("a Gateway without a wildcard TLS passthrough listener", func(t *testing.T) {
		c := waitCondition(t, key, v1alpha1.ExposureReadyCondition, metav1.ConditionFalse, v1alpha1.GatewayListenerReason)
		assert.Contains(t, c.Message, "no listener with protocol TLS, tls.mode Passthrough and a wildcard hostname")
		assertWarning(t, key, v1alpha1.GatewayListenerReason)
	})

	t.Run("a route the Gateway does not admit", func(t *testing.T) {
		apply(t, ns, fmt.Sprintf(`apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: %s}
spec:
  gatewayClassName: traefik
  listeners:
  - name: tls
    protocol: TLS
    port: 443
    hostname: "*.%s"
    tls: {mode: Passthrough}
    allowedRoutes:
      namespaces:
        from: Selector
        selector: {matchLabels: {gateway.hcp.test/edge: allowed}}
`, gatewayName, cluster.GatewayDomain))
		// Until Traefik has looked at the route again, its status still
		// holds the verdict on the previous listener (NoMatchingListenerHostname).
		waitConditionSaying(t, key, v1alpha1.ExposureReadyCondition, metav1.ConditionFalse, v1alpha1.RouteNotAcceptedReason,
			string(gatewayv1.RouteReasonNotAllowedByListeners))
		assertWarning(t, key, v1alpha1.RouteNotAcceptedReason)
	})

	t.Run("once the Gateway admits the route the control plane becomes Available", func(t *testing.T) {
		fixed := time.Now()
		labelled := &corev1.Namespace{}
		require.NoError(t, k8s.Get(testContext(t), client.ObjectKey{Name: ns}, labelled))
		patch := client.MergeFrom(labelled.DeepCopy())
		labelled.Labels["gateway.hcp.test/edge"] = "allowed"
		require.NoError(t, k8s.Patch(testContext(t), labelled, patch))
		require.NoError(t, waitAvailable(t, key, 10*time.Minute))
		t.Logf("Available %s after the namespace was admitted", time.Since(fixed).Round(time.Second))
		hosted, err := kubernetes.NewForConfig(hostedConfig(t, ns, name))
		require.NoError(t, err)
		_, err = hosted.Discovery().ServerVersion()
		require.NoError(t, err)
	})

	t.Run("nothing crashed", func(t *testing.T) { assertNoRestarts(t, restarts) })

	t.Run("deleting the Cluster removes its routes", func(t *testing.T) { deleteClusters(t, key) })
}

// waitAvailable waits until the control plane key is Available.
func waitAvailable(t *testing.T, key client.ObjectKey, timeout time.Duration) error {
	t.Helper()
	return cluster.Poll(testContext(t), timeout, time.Second, func(ctx context.Context) error {
		hcp := &v1alpha1.HostedControlPlane{}
		if err := k8s.Get(ctx, key, hcp); err != nil {
			return err
		}
		if !apimeta.IsStatusConditionTrue(hcp.Status.Conditions, v1alpha1.AvailableCondition) {
			return fmt.Errorf("%s is not Available: %+v", key, hcp.Status.Conditions)
		}
		return nil
	}, nil)
}

// waitCondition waits, for up to three minutes, until the control plane key
// has the condition with status and reason, and returns it.
func waitCondition(t *testing.T, key client.ObjectKey, condition string, status metav1.ConditionStatus, reason string) metav1.Condition {
	t.Helper()
	return waitConditionSaying(t, key, condition, status, reason, "")
}

// waitConditionSaying is waitCondition for a condition whose message also
// contains saying: what the controller reports from another controller's
// status (a Gateway's verdict on a route) may first be that status from
// before the change the test made.
func waitConditionSaying(t *testing.T, key client.ObjectKey, condition string, status metav1.ConditionStatus, reason, saying string) metav1.Condition {
	t.Helper()
	var got metav1.Condition
	eventually(t, 3*time.Minute, fmt.Sprintf("%s of %s is %s with reason %s saying %q", condition, key, status, reason, saying), func() error {
		hcp := &v1alpha1.HostedControlPlane{}
		if err := k8s.Get(testContext(t), key, hcp); err != nil {
			return err
		}
		c := apimeta.FindStatusCondition(hcp.Status.Conditions, condition)
		if c == nil || c.Status != status || c.Reason != reason || !strings.Contains(c.Message, saying) {
			return fmt.Errorf("%+v", c)
		}
		got = *c
		return nil
	})
	return got
}

// assertWarning checks that the control plane key has a Warning event with
// reason.
func assertWarning(t *testing.T, key client.ObjectKey, reason string) {
	t.Helper()
	eventually(t, 30*time.Second, "a Warning event "+reason+" of "+key.String(), func() error {
		events, err := clientset.CoreV1().Events(key.Namespace).List(testContext(t), metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Kind == "HostedControlPlane" && e.InvolvedObject.Name == key.Name && e.Type == corev1.EventTypeWarning && e.Reason == reason {
				return nil
			}
		}
		return errors.New("none yet")
	})
}

// assertRoutesAccepted checks that the Gateway accepted every TLSRoute of
// the control plane key (the API server's and konnectivity's at least) and
// resolved their backends.
func assertRoutesAccepted(t *testing.T, key client.ObjectKey) {
	t.Helper()
	routes := &gatewayv1.TLSRouteList{}
	require.NoError(t, k8s.List(testContext(t), routes, client.InNamespace(key.Namespace), client.MatchingLabels{"cluster.x-k8s.io/cluster-name": key.Name}))
	names := []string{}
	for _, route := range routes.Items {
		names = append(names, route.Name)
		require.Len(t, route.Status.Parents, 1, "TLSRoute %s has the status of one Gateway", route.Name)
		for _, c := range []gatewayv1.RouteConditionType{gatewayv1.RouteConditionAccepted, gatewayv1.RouteConditionResolvedRefs} {
			assert.True(t, apimeta.IsStatusConditionTrue(route.Status.Parents[0].Conditions, string(c)), "TLSRoute %s %s", route.Name, c)
		}
	}
	assert.Subset(t, names, []string{key.Name + "-apiserver", key.Name + "-konnectivity"})
}

// restoreGateway re-creates a deleted Gateway and waits until it is
// programmed again; it does nothing when the Gateway exists.
func restoreGateway(t *testing.T, saved *gatewayv1.Gateway) {
	t.Helper()
	ctx := context.Background()
	gw := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: saved.Namespace, Name: saved.Name, Labels: saved.Labels}, Spec: saved.Spec}
	if err := k8s.Create(ctx, gw); apierrors.IsAlreadyExists(err) {
		return
	} else if err != nil {
		t.Errorf("re-create Gateway %s/%s: %v", saved.Namespace, saved.Name, err)
		return
	}
	eventually(t, 2*time.Minute, "the Gateway is programmed again", func() error {
		return provider.GatewayProgrammed(ctx, k8s, client.ObjectKeyFromObject(saved))
	})
}

// podRestarts counts the container restarts of the pods that must never
// crash: the provider's controller and extension, Cluster API's manager
// and Traefik.
func podRestarts(t *testing.T) map[string]int32 {
	t.Helper()
	out := map[string]int32{}
	for _, ns := range []string{"hosted-control-plane-system", "capi-system", "traefik"} {
		pods := &corev1.PodList{}
		require.NoError(t, k8s.List(testContext(t), pods, client.InNamespace(ns)))
		for _, p := range pods.Items {
			for _, s := range p.Status.ContainerStatuses {
				out[ns+"/"+p.Name+"/"+s.Name] = s.RestartCount
			}
		}
	}
	return out
}

func assertNoRestarts(t *testing.T, before map[string]int32) {
	t.Helper()
	after := podRestarts(t)
	assert.Equal(t, before, after, "container restarts of the controller, the extension, Cluster API and Traefik")
}
