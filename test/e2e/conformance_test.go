package e2e

import (
	"encoding/xml"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/test/slots"
	"github.com/hostedcp/cluster-api-provider-hosted/tools/localcluster/cluster"
	"github.com/hostedcp/cluster-api-provider-hosted/tools/localcluster/images"
	"github.com/hostedcp/cluster-api-provider-hosted/tools/localcluster/local"
	"github.com/hostedcp/cluster-api-provider-hosted/tools/localcluster/provider"
)

// conformanceMode is a selection of the conformance suite's tests.
type conformanceMode struct {
	// focus and skip are ginkgo's regular expressions over the tests'
	// full names.
	focus, skip string
}

// conformanceModes are the values of CONFORMANCE. Serial tests change what
// every other test relies on (taints, node labels, the cluster's pods), and
// disruptive ones restart or break nodes: both only in the long mode, and
// the disruptive ones not even there, as the workers share one host.
// CONFORMANCE_SIGS narrows a mode to the tests of some SIGs (e.g.
// network,storage), so that a long run can be split into parts.
var conformanceModes = map[string]conformanceMode{
	// The tests that depend most on how a hosted control plane is wired:
	// the API server calling webhooks and an aggregated API server in pods
	// on the workers (through konnectivity), the service account issuer,
	// cluster DNS, and Services across the two nodes.
	"ci":   {focus: strings.Join(ciConformanceTests, "|"), skip: `\[Serial\]|\[Disruptive\]`},
	"full": {focus: `\[Conformance\]`, skip: `\[Serial\]|\[Disruptive\]`},
	"long": {focus: `\[Conformance\]`, skip: `\[Disruptive\]`},
}

// ciConformanceTests are the ci mode's tests, each a part of a full name.
var ciConformanceTests = []string{
	`AdmissionWebhook \[Privileged:ClusterAdmin\] should be able to deny pod and configmap creation`,
	`Aggregator Should be able to support the 1.17 Sample API Server using the current Aggregator`,
	`CustomResourceConversionWebhook \[Privileged:ClusterAdmin\] should be able to convert from CR v1 to CR v2`,
	`ServiceAccountIssuerDiscovery should support OIDC discovery of service account issuer`,
	`\[sig-network\] DNS should provide DNS for services `,
	`\[sig-network\] DNS should provide DNS for the cluster `,
	`\[sig-network\] Services should serve a basic endpoint from pods `,
	`\[sig-network\] Services should be able to create a functioning NodePort service `,
}

// harnessSkips are conformance tests this machine cannot run, with why.
// Each is skipped in every mode and its reason printed.
var harnessSkips = []struct{ test, reason string }{
	{
		`\[sig-node\] ImageVolume should succeed with pod and pull policy of Always`,
		"the workers' containerd is Debian 12's 1.6.20, which cannot mount an image as a volume (containerd 2.1 can), " +
			"and the test pulls its image (pull policy Always) from registry.k8s.io, which nothing here serves",
	},
}

// conformanceWorkers are the two nodes the suite schedules on: more than
// one, as its scheduling, DNS and Service tests want, each on a link and a
// pod network no other test's worker uses.
var conformanceWorkers = []workerSpec{
	{name: "conformance-1", index: 2, podCIDR: "192.168.12.0/24"},
	{name: "conformance-2", index: 3, podCIDR: "192.168.13.0/24"},
}

// TestConformance runs the Kubernetes conformance suite of the release
// hosted control planes run (e2e.test from k8s.io/kubernetes, built from
// source with its test images) against a hosted cluster served through the
// Gateway, with two workers that joined with kubeadm join, as a user would
// run Sonobuoy against their cluster. CONFORMANCE picks the tests: ci (a
// subset make test runs), full (every conformance test but the serial and
// disruptive ones, make conformance) or long (serial ones too);
// CONFORMANCE_FOCUS narrows full or long to the tests whose names match a
// regular expression (to run failures again). The suite's JUnit report
// lands in CONFORMANCE_REPORT (default
// bin/conformance/report-<mode>[-<sigs>][-focus]); the test prints the totals of the
// conformance tests in it and the reason of every failure and skip, and
// fails when any failed.
func TestConformance(t *testing.T) {
	modeName := os.Getenv("CONFORMANCE")
	if modeName == "" {
		t.Skip("the conformance suite runs with CONFORMANCE=ci, full or long (make conformance)")
	}
	mode, ok := conformanceModes[modeName]
	require.True(t, ok, "CONFORMANCE=%q: want ci, full or long", modeName)
	part := modeName
	if sigs := os.Getenv("CONFORMANCE_SIGS"); sigs != "" {
		require.Regexp(t, `^[a-z-]+(,[a-z-]+)*$`, sigs, "CONFORMANCE_SIGS: want SIG names separated by commas, such as network,storage")
		mode.focus = `\[sig-(` + strings.ReplaceAll(sigs, ",", "|") + `)\] .*(` + mode.focus + `)`
		part += "-" + strings.ReplaceAll(sigs, ",", "-")
	}
	if focus := os.Getenv("CONFORMANCE_FOCUS"); focus != "" {
		// A full name ends with its tags, [Conformance] among them.
		require.NotEqual(t, "ci", modeName, "CONFORMANCE_FOCUS narrows the full or long mode, not ci")
		_, err := regexp.Compile(focus)
		require.NoError(t, err, "CONFORMANCE_FOCUS: want a regular expression over the tests' names")
		mode.focus = `(` + focus + `).*(` + mode.focus + `)`
		part += "-focus"
	}
	parallel(t, slots.Uses(sharedGateway))
	ctx := testContext(t)
	start := time.Now()
	suite, err := images.EnsureConformance(ctx, root, t.Output())
	require.NoError(t, err)
	t.Logf("the suite and its images are ready in %s", time.Since(start).Round(time.Second))
	for _, ref := range suite.Missing {
		t.Logf("not built here, so a test that runs it fails: %s", ref)
	}

	ns := namespace(t, "conformance")
	const name = "conformance"
	apply(t, ns, workerCluster(name, 1)+fmt.Sprintf("  gateway: {name: %s, namespace: %s}\n", provider.GatewayName, provider.GatewayNamespace))
	key := client.ObjectKey{Namespace: ns, Name: name}
	require.NoError(t, local.WaitAvailable(ctx, k8s, key, 15*time.Minute))
	t.Logf("the hosted cluster is Available %s after it was created", time.Since(start).Round(time.Second))
	cfg := hostedConfig(t, ns, name)
	hosted, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	hostedClient, err := client.New(cfg, client.Options{Scheme: cluster.Scheme()})
	require.NoError(t, err)
	workers := startConformanceWorkers(t, ns, name, bootstrapToken(t, hostedClient, hosted), suite)
	t.Cleanup(func() {
		for _, w := range workers {
			assert.NoError(t, w(), "stop a worker")
		}
	})

	kubeconfig := writeGatewayKubeconfig(t, key)
	report := os.Getenv("CONFORMANCE_REPORT")
	if report == "" {
		report = filepath.Join(root, "bin", "conformance", "report-"+part)
	}
	require.NoError(t, os.RemoveAll(report))
	require.NoError(t, os.MkdirAll(report, 0o755))
	skip := mode.skip
	for _, s := range harnessSkips {
		skip += "|" + s.test
		t.Logf("skipped on this machine: %s: %s", s.test, s.reason)
	}
	procs := 4
	if p, err := strconv.Atoi(os.Getenv("CONFORMANCE_PROCS")); err == nil && p > 0 {
		procs = p
	}
	args := []string{
		"--procs=" + strconv.Itoa(procs), "--timeout=6h", "--no-color", "--silence-skips",
		"--focus=" + mode.focus, "--skip=" + skip,
		suite.Suite, "--",
		"--kubeconfig=" + kubeconfig, "--provider=skeleton",
		"--kubectl-path=" + images.HostBinaries(root)["kubectl"],
		"--report-dir=" + report, "--e2e-output-dir=" + report,
	}
	log, err := os.Create(filepath.Join(report, "e2e.log"))
	require.NoError(t, err)
	defer log.Close()
	run := exec.CommandContext(ctx, suite.Ginkgo, args...)
	run.Stdout, run.Stderr, run.Dir = log, log, report
	t.Logf("running %s %s (output in %s)", suite.Ginkgo, strings.Join(args, " "), log.Name())
	start = time.Now()
	runErr := run.Run()
	t.Logf("the suite ran for %s: %v", time.Since(start).Round(time.Second), runErr)

	results, err := readJUnit(filepath.Join(report, "junit_01.xml"), regexp.MustCompile(mode.focus), func(test, message string) string {
		for _, s := range harnessSkips {
			if regexp.MustCompile(s.test).MatchString(test) {
				return "not run on this machine: " + s.reason
			}
		}
		if regexp.MustCompile(mode.skip).MatchString(test) {
			return "not run in mode " + modeName + " (" + mode.skip + ")"
		}
		return message
	})
	require.NoError(t, err, "the suite wrote no report; its output ends with:\n%s", tailOf(log.Name()))
	for _, r := range results.skipped {
		t.Logf("skipped: %s", r)
	}
	for _, r := range results.failed {
		t.Logf("FAILED: %s", r)
	}
	summary := fmt.Sprintf("%d passed, %d failed, %d skipped", len(results.passed), len(results.failed), len(results.skipped))
	t.Logf("conformance (%s, JUnit in %s): %s", part, report, summary)
	// The plain line a reader of make conformance looks for.
	fmt.Println(summary)
	assert.NotEmpty(t, results.passed, "some conformance test ran")
	assert.Empty(t, results.failed, "every conformance test this machine can run passes")
}

// startConformanceWorkers starts the conformance workers with the suite's
// images, lets each reach the other's address and pods, and waits until
// both nodes are Ready with the add-ons running on them. It returns how to
// stop each.
func startConformanceWorkers(t *testing.T, ns, clusterName, token string, suite images.Conformance) []func() error {
	t.Helper()
	var tarballs []string
	for _, img := range suite.Images {
		tarballs = append(tarballs, img.Tar)
	}
	tarballs = append(tarballs, images.Tarball(root, "registry.k8s.io/etcd:"+images.EtcdTag))
	var workers []*cluster.Worker
	var stops []func() error
	for _, spec := range conformanceWorkers {
		spec.tarballs = tarballs
		w := startWorker(t, ns, clusterName, spec, token, true)
		workers = append(workers, w)
		stops = append(stops, sync.OnceValue(w.Stop))
		require.NoError(t, w.ConfigureCNI())
	}
	for i, w := range workers {
		for j, peer := range workers {
			if i != j {
				require.NoError(t, w.AcceptFrom(peer.NodeIP+"/32", conformanceWorkers[j].podCIDR))
			}
		}
	}
	hosted, err := kubernetes.NewForConfig(hostedConfig(t, ns, clusterName))
	require.NoError(t, err)
	ctx := testContext(t)
	for _, spec := range conformanceWorkers {
		eventually(t, 5*time.Minute, "node "+spec.name+" Ready", nodeReady(ctx, hosted, spec.name))
		// The node's own add-ons, DaemonSets; the konnectivity agents and
		// CoreDNS are Deployments, which may run on either node, and the
		// suite waits for every kube-system pod to be ready before it starts.
		for _, selector := range []string{"k8s-app=kas-tunnel", "k8s-app=kube-proxy"} {
			eventually(t, 5*time.Minute, selector+" ready on "+spec.name, func() error {
				return readyPodOn(ctx, hosted, "kube-system", selector, spec.name)
			})
		}
	}
	return stops
}

// writeGatewayKubeconfig writes the Cluster's admin kubeconfig for the
// suite, which runs as a process on the host: the gateway hostname stays
// the TLS server name (the Gateway routes by it) while the connection goes
// to the Gateway's address, which the local cluster's DNS would give the
// name and the host's resolver does not know.
func writeGatewayKubeconfig(t *testing.T, key client.ObjectKey) string {
	t.Helper()
	data, err := local.Kubeconfig(testContext(t), k8s, key)
	require.NoError(t, err)
	kc, err := clientcmd.Load(data)
	require.NoError(t, err)
	for _, c := range kc.Clusters {
		u, err := url.Parse(c.Server)
		require.NoError(t, err)
		c.TLSServerName = u.Hostname()
		u.Host = cluster.GatewayAddress + ":" + u.Port()
		c.Server = u.String()
	}
	file := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*kc, file))
	return file
}

// conformanceResults are the tests of a JUnit report that match the
// focus, each with its reason when it failed or was skipped.
type conformanceResults struct{ passed, failed, skipped []string }

// readJUnit reads the suite's JUnit report. The report lists every test of
// the suite; those outside focus were not selected and are left out.
// skipReason says why a test was skipped, given the report's message.
func readJUnit(file string, focus *regexp.Regexp, skipReason func(test, message string) string) (conformanceResults, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return conformanceResults{}, err
	}
	var report struct {
		Suites []struct {
			Cases []struct {
				Name    string `xml:"name,attr"`
				Failure *struct {
					Text string `xml:",chardata"`
				} `xml:"failure"`
				Error *struct {
					Text string `xml:",chardata"`
				} `xml:"error"`
				Skipped *struct {
					Message string `xml:"message,attr"`
				} `xml:"skipped"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(data, &report); err != nil {
		return conformanceResults{}, fmt.Errorf("%s: %w", file, err)
	}
	var r conformanceResults
	for _, s := range report.Suites {
		for _, c := range s.Cases {
			if !focus.MatchString(c.Name) {
				continue
			}
			switch {
			case c.Failure != nil:
				r.failed = append(r.failed, c.Name+": "+failureReason(c.Failure.Text))
			case c.Error != nil:
				r.failed = append(r.failed, c.Name+": "+failureReason(c.Error.Text))
			case c.Skipped != nil:
				r.skipped = append(r.skipped, c.Name+": "+skipReason(c.Name, c.Skipped.Message))
			default:
				r.passed = append(r.passed, c.Name)
			}
		}
	}
	return r, nil
}

// failureReason is the line of a ginkgo failure that says what failed.
func failureReason(text string) string {
	for _, line := range strings.Split(text, "\n") {
		if line = strings.TrimSpace(line); strings.HasPrefix(line, "[FAILED]") || strings.HasPrefix(line, "[PANICKED]") || strings.HasPrefix(line, "[TIMEDOUT]") {
			return line
		}
	}
	return strings.TrimSpace(text)
}

// tailOf is the end of a log file.
func tailOf(file string) string {
	tail, err := cluster.TailFile(file, 40)
	if err != nil {
		return err.Error()
	}
	return tail
}
