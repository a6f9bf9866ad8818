package rotation

import (
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

// Emergency are the keys an emergency rotation names.
var Emergency = []string{v1alpha1.RotateServiceAccountKey, v1alpha1.RotateEncryptionKey, v1alpha1.RotateEtcdCA, v1alpha1.RotateFrontProxyCA}

// Keys are what the rotate annotation may name: the cluster CA besides.
var Keys = append(slices.Clone(Emergency), v1alpha1.RotateClusterCA)

// Allowed says what the rotate annotation takes, for messages.
var Allowed = fmt.Sprintf("a comma-separated list of %s, or %s for all but the cluster CA", strings.Join(Keys, ", "), v1alpha1.RotateEmergency)

// Requests are the keys the value of the rotate annotation names, each
// once (emergency names them all), and the names it holds that are none of
// them.
func Requests(value string) (keys, unknown []string) {
	for item := range strings.SplitSeq(value, ",") {
		item = strings.TrimSpace(item)
		names := []string{item}
		switch {
		case item == v1alpha1.RotateEmergency:
			names = Emergency
		case !slices.Contains(Keys, item):
			unknown = append(unknown, item)
			continue
		}
		for _, key := range names {
			if !slices.Contains(keys, key) {
				keys = append(keys, key)
			}
		}
	}
	return keys, unknown
}

// Start is a rotation asked for at now.
func Start(first v1alpha1.RotationPhase, now time.Time) *v1alpha1.KeyRotation {
	t := metav1.NewTime(now.UTC().Truncate(time.Second))
	return &v1alpha1.KeyRotation{Phase: first, Since: t, StartedAt: t}
}

// Step is what a pass does for a rotation under way.
type Step struct {
	// Next is the rotation after the pass: the same one, the next phase, or
	// nil once the rotation ended.
	Next *v1alpha1.KeyRotation
	// Replace asks the pass to write the new key where the old one is.
	Replace bool
	// Wake is how soon the pass should look again for what no watch reports
	// (the end of a wait); zero when a watch brings it back.
	Wake time.Duration
	// Message says what the phase is doing or waits for.
	Message string
}

// enter moves r into phase at now.
func enter(r *v1alpha1.KeyRotation, phase v1alpha1.RotationPhase, now time.Time) *v1alpha1.KeyRotation {
	next := r.DeepCopy()
	next.Phase, next.Since = phase, metav1.NewTime(now.UTC().Truncate(time.Second))
	return next
}

// ServiceAccountObserved is what a pass saw of a rotation of the service
// account key.
type ServiceAccountObserved struct {
	// Rolled: every API server and controller manager pod, terminating
	// ones included, runs with the keys the phase renders, and their
	// Deployments have rolled out.
	Rolled bool
	// Replaced: <cluster>-sa holds the new key.
	Replaced bool
	// MaxTokenLifetime is the longest lifetime the API servers give a
	// token.
	MaxTokenLifetime time.Duration
	// DropOldKey: the user asked not to wait for the old key's tokens to
	// expire (DropOldServiceAccountKeyAnnotation).
	DropOldKey bool
}

// ServiceAccountKey is the step of a rotation of the service account key in
// r, from what the pass observed at now.
func ServiceAccountKey(r *v1alpha1.KeyRotation, o ServiceAccountObserved, now time.Time) Step {
	switch r.Phase {
	case v1alpha1.TrustingNewKey:
		if o.Rolled {
			return Step{Next: enter(r, v1alpha1.SigningWithNewKey, now), Message: "every API server trusts the old and the new key; they and the controller manager roll to sign with the new one"}
		}
		return Step{Next: r, Message: "the API servers roll to trust the new key as well as the old; they still sign with the old"}
	case v1alpha1.SigningWithNewKey:
		if o.Rolled {
			return waitForOldTokens(enter(r, v1alpha1.WaitingForOldTokens, now), o, now)
		}
		return Step{Next: r, Message: "the API servers and the controller manager roll to sign with the new key; every API server trusts both"}
	case v1alpha1.WaitingForOldTokens:
		return waitForOldTokens(r, o, now)
	default: // DroppingOldKey
		switch {
		case !o.Replaced:
			return Step{Next: r, Replace: true, Message: "the new key replaces the old one in its Secret; the API servers still trust both"}
		case o.Rolled:
			return Step{Message: "the API servers trust the new key alone"}
		}
		return Step{Next: r, Message: "the API servers roll to trust the new key alone"}
	}
}

// waitForOldTokens keeps the old key trusted until every token it signed
// has expired: the longest lifetime after the last pod stopped signing with
// it, when r entered WaitingForOldTokens; or until the user asks to drop it
// sooner, accepting that the tokens it signed are refused from then.
func waitForOldTokens(r *v1alpha1.KeyRotation, o ServiceAccountObserved, now time.Time) Step {
	until := r.Since.Add(o.MaxTokenLifetime)
	if o.DropOldKey && now.Before(until) {
		return Step{
			Next: enter(r, v1alpha1.DroppingOldKey, now), Replace: true,
			Message: fmt.Sprintf("the old key is dropped before its tokens expired, as %s asked: a token it signed is refused once the API servers rolled; the new key replaces it in its Secret", v1alpha1.DropOldServiceAccountKeyAnnotation),
		}
	}
	if !now.Before(until) {
		return Step{
			Next: enter(r, v1alpha1.DroppingOldKey, now), Replace: true,
			Message: "every token the old key signed has expired; the new key replaces it in its Secret",
		}
	}
	return Step{Next: r, Wake: until.Sub(now), Message: fmt.Sprintf(
		"nothing signs with the old key any more; it is trusted until %s, when every token it signed has expired (the API servers' longest token lifetime, %s, after the last one stopped signing with it)",
		until.UTC().Format(time.RFC3339), o.MaxTokenLifetime)}
}

// EncryptionObserved is what a pass saw of a rotation of the encryption
// key.
type EncryptionObserved struct {
	// Rolled: every API server pod, terminating ones included, runs with
	// the configuration the phase wrote, and their Deployment has rolled
	// out.
	Rolled bool
	// Rewritten: every Secret was written again with the new key.
	Rewritten bool
}

// EncryptionKey is the step of a rotation of the encryption key in r, from
// what the pass observed at now. A step into another phase asks the pass to
// write that phase's configuration (AddKey, Promote and Drop of
// internal/encryption); one to nil, to record the end.
func EncryptionKey(r *v1alpha1.KeyRotation, o EncryptionObserved, now time.Time) Step {
	switch r.Phase {
	case v1alpha1.DecryptingWithNewKey:
		if o.Rolled {
			return Step{Next: enter(r, v1alpha1.EncryptingWithNewKey, now), Message: "every API server decrypts with the new key; they roll to encrypt with it"}
		}
		return Step{Next: r, Message: "the API servers roll to decrypt with the new key as well; they still encrypt with the old"}
	case v1alpha1.EncryptingWithNewKey:
		switch {
		case o.Rolled && o.Rewritten:
			return Step{Next: enter(r, v1alpha1.DroppingOldKey, now), Message: "every Secret is stored with the new key; the API servers roll without the old one"}
		case o.Rolled:
			return Step{Next: r, Message: "every API server encrypts with the new key; every Secret is written again with it (EncryptionReady counts them)"}
		}
		return Step{Next: r, Message: "the API servers roll to encrypt with the new key; every API server decrypts with both"}
	default: // DroppingOldKey
		if o.Rolled {
			return Step{Message: "the API servers encrypt and decrypt with the new key alone"}
		}
		return Step{Next: r, Message: "the API servers roll without the old key; every Secret is stored with the new one"}
	}
}

// AuthorityObserved is what a pass saw of a rotation of a certificate
// authority.
type AuthorityObserved struct {
	// Rolled: every certificate of the CA is issued by the Issuer the phase
	// renders (and the pass observed its Secret), and every pod that
	// presents or verifies one, terminating ones included, runs what the
	// phase renders, and their workloads have rolled out.
	Rolled bool
	// Replaced: the CA's Secret holds the new CA, a root of its own.
	Replaced bool
	// Kubelets is what the pass saw of the kubelets' client certificates,
	// for the cluster CA, which signs them; nil for the other CAs.
	Kubelets *KubeletsObserved
}

// KubeletsObserved is what a pass saw of the kubelets' client
// certificates during a rotation of the cluster CA.
type KubeletsObserved struct {
	// Nodes are the names of the workload cluster's nodes.
	Nodes []string
	// Renewed are the nodes whose kubelet the pass saw with a client
	// certificate of the new CA (in a CertificateSigningRequest the
	// controller manager signed with it). The rotation records them
	// (RenewedNodes), since the workload cluster removes the requests an
	// hour after they were issued.
	Renewed []string
	// Lifetime is the longest lifetime of a kubelet client certificate
	// (the controller manager's --cluster-signing-duration): one the old
	// CA signed has expired that long after the controller manager
	// stopped signing with it.
	Lifetime time.Duration
}

// KubeletsPoll is how often a pass looks again for kubelets that renewed
// their client certificate while the rotation waits for them: no watch
// reports a CertificateSigningRequest of the workload cluster.
const KubeletsPoll = 30 * time.Second

// Authority is the step of a rotation of a certificate authority in r,
// from what the pass observed at now. A step asks to Replace only in a
// pass that rendered DroppingOldCA, where the CA's own Certificate is
// self-signed already, so that cert-manager issues the new key a
// certificate of its own and never one the cluster CA signs.
func Authority(r *v1alpha1.KeyRotation, o AuthorityObserved, now time.Time) Step {
	switch r.Phase {
	case v1alpha1.TrustingNewCA:
		if o.Rolled {
			return Step{Next: enter(r, v1alpha1.IssuingFromNewCA, now), Message: "everything trusts the old and the new CA; every certificate of the CA is issued again by the new one"}
		}
		return Step{Next: r, Message: "a new CA is issued, and everything that verifies its certificates rolls to trust it as well as the old one; certificates are still issued by the old"}
	case v1alpha1.IssuingFromNewCA:
		switch {
		case o.Rolled && o.Kubelets != nil:
			return waitForKubelets(enter(r, v1alpha1.WaitingForKubelets, now), o, now)
		case o.Rolled:
			return Step{Next: enter(r, v1alpha1.DroppingOldCA, now), Message: "every certificate of the CA is issued by the new one and in use; the new CA replaces the old one in its Secret"}
		}
		return Step{Next: r, Message: "every certificate of the CA is issued again by the new one, and what presents them takes them up (etcd's members at their next connections, the other pods by a roll); everything trusts both"}
	case v1alpha1.WaitingForKubelets:
		return waitForKubelets(r, o, now)
	default: // DroppingOldCA
		switch {
		case !o.Replaced:
			return Step{Next: r, Replace: true, Message: "the new CA replaces the old one in its Secret; certificates are issued by the new one"}
		case o.Rolled:
			return Step{Message: "everything trusts the new CA alone"}
		}
		return Step{Next: r, Message: "everything rolls to trust the new CA alone, and certificates are issued from its Secret"}
	}
}

// waitForKubelets keeps the old cluster CA trusted for client certificates
// until no kubelet can still present one it signed: every node of the
// workload cluster was seen with one of the new CA (none when it has no
// node), or the longest lifetime of one has passed since r entered
// WaitingForKubelets, when the controller manager signed with the new CA
// alone. The nodes seen so far are recorded in the rotation.
func waitForKubelets(r *v1alpha1.KeyRotation, o AuthorityObserved, now time.Time) Step {
	if !o.Rolled {
		return Step{Next: r, Message: "the pods roll to what the phase renders; the API servers trust the old and the new CA"}
	}
	next := r.DeepCopy()
	next.RenewedNodes = renewedNodes(r.RenewedNodes, o.Kubelets)
	nodes, renewed := len(o.Kubelets.Nodes), len(next.RenewedNodes)
	until := r.Since.Add(o.Kubelets.Lifetime)
	switch {
	case nodes == 0:
		return Step{Next: enter(next, v1alpha1.DroppingOldCA, now), Message: "the workload cluster has no node whose kubelet could present a client certificate of the old CA; the new CA replaces the old one in its Secret"}
	case renewed == nodes:
		return Step{Next: enter(next, v1alpha1.DroppingOldCA, now), Message: fmt.Sprintf(
			"the kubelet of every node (%d) renewed its client certificate with the new CA; the new CA replaces the old one in its Secret", nodes)}
	case !now.Before(until):
		return Step{Next: enter(next, v1alpha1.DroppingOldCA, now), Message: fmt.Sprintf(
			"every kubelet client certificate the old CA signed has expired (%d of %d nodes were seen renewing theirs with the new CA); the new CA replaces the old one in its Secret", renewed, nodes)}
	}
	return Step{Next: next, Wake: min(until.Sub(now), KubeletsPoll), Message: fmt.Sprintf(
		"the controller manager signs kubelet client certificates with the new CA, and the kubelets of %d of %d nodes renewed theirs with it (a kubelet renews at 70 to 90%% of its certificate's lifetime); the API servers trust the old CA too until every node's has, or at the latest until %s, when every one it signed has expired",
		renewed, nodes, until.UTC().Format(time.RFC3339))}
}

// renewedNodes are the nodes recorded as renewed and those o saw renew,
// sorted, of the nodes the workload cluster has now: a node removed since
// needs no renewal.
func renewedNodes(recorded []string, o *KubeletsObserved) []string {
	seen := make(map[string]bool, len(recorded)+len(o.Renewed))
	for _, node := range slices.Concat(recorded, o.Renewed) {
		seen[node] = true
	}
	var out []string
	for _, node := range o.Nodes {
		if seen[node] {
			out = append(out, node)
			seen[node] = false // each once
		}
	}
	slices.Sort(out)
	return out
}
