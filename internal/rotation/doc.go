// Package rotation decides the phases of a key rotation: what a pass does
// next, from the phase the status records and what the pass observed of
// the pods. The controller renders each phase (internal/components), rolls
// the pods through the usual rollout (a new pod ready before an old one
// goes, maxUnavailable 0) and records the phase this package returns.
//
// A rotation of the service account key never refuses a valid token:
//
//  1. TrustingNewKey: the API servers roll to verify tokens signed by the
//     old key or the new one (--service-account-key-file twice), and still
//     sign with the old. Nothing signs with the new key yet, so an API
//     server that does not trust it yet refuses nothing.
//  2. SigningWithNewKey, once every API server pod (terminating ones
//     included) trusts both: they sign with the new key
//     (--service-account-signing-key-file) and so does the controller
//     manager (--service-account-private-key-file, for token Secrets). Any
//     API server verifies what any other signs.
//  3. WaitingForOldTokens, once no pod signs with the old key: it is
//     trusted for the API servers' longest token lifetime
//     (--service-account-max-token-expiration) from then, so every token
//     it signed has expired and every token the kubelet keeps in a pod was
//     replaced by one of the new key (it does so at 80% of the lifetime
//     it asks for, at most every 24 hours). The user may end the wait
//     sooner (DropOldServiceAccountKeyAnnotation), after a leak, and accept
//     that whatever still holds a token of the old key is refused.
//  4. DroppingOldKey: the new key is written into <cluster>-sa, where the
//     key always is outside a rotation, and once that is observed the API
//     servers roll to trust it alone. The rotation ends when they have.
//
// A rotation of the encryption key never leaves a Secret unreadable:
//
//  1. DecryptingWithNewKey: the API servers roll to decrypt with the new
//     key as well (second in the EncryptionConfiguration); they encrypt with
//     the old. An API server that does not know the new key yet meets no
//     data written with it.
//  2. EncryptingWithNewKey, once every API server knows both: the new key
//     goes first and the API servers roll to encrypt with it. Once they
//     have, every Secret is written again (internal/encryption's Rewrite),
//     and is stored under the new key.
//  3. DroppingOldKey, once the rewrite is done: the old key leaves the
//     configuration and the API servers roll without it.
//
// A rotation of the front proxy CA (see render.Authority), and one of the
// etcd CA an earlier release started, never refuses a certificate that is
// still presented:
//
//  1. TrustingNewCA: a new CA, a root of its own, is issued into
//     <secret>-next, and everything that verifies certificates of the CA
//     rolls to trust a bundle of the old CA's anchor and the new CA
//     (<cluster>-proxy-trust: the API servers' requestheader CA, which they
//     publish to extension API servers). Certificates are still issued by
//     the old CA.
//  2. IssuingFromNewCA, once every pod of those workloads (terminating
//     ones included) runs the bundle: every certificate of the CA is issued
//     again by the new one; a certificate of either CA verifies everywhere.
//     The API server pods roll, since the ca.crt beside their certificates
//     changed.
//  3. DroppingOldCA, once each certificate's Secret, as the pass observed
//     it, holds one of the new CA and every pod started after: nothing
//     presents a certificate of the old CA. The CA's own Certificate turns
//     self-signed, the new CA's key is written into <secret> (cert-manager
//     keeps a key it finds there and issues the certificate for it), the
//     certificates are issued from <secret> again, and everything rolls to
//     trust the ca.crt beside its certificates: the new CA alone. The
//     rotation ends when every pod runs so; <secret>-next goes.
//
// A rotation of the etcd CA takes the same phases, but its new CA is
// cross-signed (KeyRotation's crossSigned), so that etcd's members, which
// read their trusted CA at start only, restart once instead of twice.
// Every restart of etcd's leader hands its leadership over and drops the
// writes proposed meanwhile, so a restart fewer is a chance fewer of that.
//
//  1. TrustingNewCA: the new CA is issued into <secret>-next, and the
//     controller writes <secret>-cross: the new CA's key, with a
//     certificate of it (the new CA's subject, key and key identifier)
//     that the old CA signs, followed by the old CA's chain, and the old
//     CA's ca.crt. Nothing rolls.
//  2. IssuingFromNewCA: every certificate of the CA (the members' serving
//     and peer certificates, the API servers' and the health check's
//     client certificates) is issued again by a cert-manager CA Issuer on
//     <secret>-cross. Each presents leaf, cross-signed certificate, old
//     chain, and keeps the ca.crt it had, so what trusts the old CA (every
//     member, every API server, at start or after a restart) verifies it,
//     as well as what is still of the old CA: nothing rolls for trust. The
//     members and the API servers load their etcd certificates at every
//     TLS handshake, so once the kubelet has written the new ones into a
//     running pod's files (a minute or so after the Secrets changed) its
//     next connections present them. A certificate counts as issued again
//     once the new CA's key signed it (its authority key identifier). The
//     controller connects to each member's client and peer ports and
//     verifies what it presents with the new CA alone
//     (etcd.Checker.Presents); the phase ends only once every member
//     passes, since from DroppingOldCA on what restarts trusts the new CA
//     alone.
//  3. DroppingOldCA: the CA's own Certificate turns self-signed and the new
//     CA's key is written into <secret>, as above. Once cert-manager has
//     issued it its self-signed certificate there, <cluster>-etcd-trust
//     holds it, and the members (for clients and peers), the API servers
//     (--etcd-cafile) and the controller's and the extension's etcd
//     clients verify with that file, the new CA alone: the members and the
//     API servers roll once. Certificates are still issued by
//     <secret>-cross meanwhile, and a member that still trusts the old CA
//     verifies them through the cross-signed certificate; one that trusts
//     the new CA alone verifies leaf, new CA. The rotation ends when every
//     pod runs so (status trustSecret: what verifies keeps reading
//     <cluster>-etcd-trust, which holds the CA of <secret>, ever after);
//     certificates are issued from <secret> again, which restarts nothing,
//     and <secret>-next and <secret>-cross go.
//
// Until its first rotation each of these CAs is an intermediate the
// cluster CA signs, and cert-manager's CA issuer writes, as ca.crt beside
// every certificate, the root at the end of the issuing CA's chain: the
// cluster CA. So etcd trusted every client certificate the cluster CA
// signs, and the API servers every front proxy certificate of that name.
// A rotated CA is a root of its own, trusted for its own certificates only.
//
// The rotate annotation's emergency names every key above: their rotations
// run side by side, each phase moving on as soon as what it waits for is
// observed; rollouts of phases that change the same pods are taken
// together (the pass's stamp holds every step).
//
// A rotation of the cluster CA (render.Input.ClusterAuthority) takes the
// same phases, with one more, and never asks a joined worker to trust
// anything new: a kubelet trusts only the CA it joined with
// (/etc/kubernetes/pki/ca.crt, also in kubelet.conf) to verify the API
// server, and verifies the API server's kubelet client certificate (logs,
// exec) against the same file. So in TrustingNewCA the controller also
// writes <cluster>-ca-cross: the new CA's key with a certificate of it (the
// new CA's subject, key and key identifier) that the old CA signs. From
// IssuingFromNewCA on, the certificates something in the workload cluster
// verifies with the CA it was given once (the API server's serving
// certificate and kubelet client certificate, konnectivity's and the
// tunnel's serving certificates: render.Authority.ServingIssuer) are issued
// by a cert-manager CA Issuer on <cluster>-ca-cross, which presents the
// cross-signed certificate as their chain (it is no self-signed root, so
// pkg/util/pki ParseSingleCertificateChain keeps it): a verifier that
// trusts only the old root builds leaf, cross-signed, old root; one that
// trusts the new root builds leaf, new root. They stay so after the
// rotation, however long joined kubelets keep the old trust; the other
// certificates (the admin's, the components' clients) are issued by the
// new CA itself. What verifies client certificates trusts both roots while
// Bundled (the API servers' --client-ca-file, <cluster>-ca-trust), and so
// do <cluster>-kubeconfig and kube-public/cluster-info; the controller
// manager signs kubelet client certificates (and publishes kube-root-ca.crt)
// with the CA that issues, the new one from IssuingFromNewCA on.
// <cluster>-ca, which the kubeadm bootstrap provider reads for new workers
// (it needs a certificate and a key there and pins the hash of every
// certificate in tls.crt), holds the old CA until DroppingOldCA and the new
// one after, as the etcd CA's Secret does.
//
// WaitingForKubelets, after IssuingFromNewCA: the old root stays trusted
// for client certificates until no kubelet can present one it signed. A
// kubelet renews its client certificate at 70-90% of its lifetime, through
// a CSR the controller manager signs with the new CA by then (and a kubelet
// joining meanwhile gets its first one from it). The controller follows
// those: each pass lists the workload cluster's kubelet client CSRs, and a
// node whose name a certificate the new CA signed carries
// (system:node:<name>) is recorded in the rotation (RenewedNodes), since
// the workload cluster removes a CSR an hour after it was issued. The wait
// ends once every node the workload cluster has is recorded (at once
// without a node), and otherwise, for a node that never renews (it is
// down, say), once the longest lifetime of a kubelet client certificate
// (the controller manager's --cluster-signing-duration, a year by default)
// has passed since the phase began. A renewed kubelet closes its
// connections and opens new ones with the new certificate, so nothing it
// holds is of the old CA then. DroppingOldCA, in addition, waits until the etcd
// and front proxy CAs are roots of their own (a rotation of the cluster CA
// starts theirs when they never were): the old cluster CA signs nothing
// in use then. After it, nothing holds the old key; <cluster>-ca-cross
// keeps its signature on the new key, valid no longer than the old root.
// A second rotation cross-signs the next key with the current one, so a
// worker that still trusts the root of two rotations before must be joined
// again first.
//
// What this design rests on, as Kubernetes behaves (checked against
// kubeadm's and the kubelet's sources): kubeadm join takes the CA of
// kube-public/cluster-info when any certificate in its bundle matches a
// pinned public key hash (validateClusterCA, pubkeypin CheckAny), so
// cluster-info may carry the old and the new root while the bootstrap
// provider pins the hash of either, and a worker joined during the
// rotation writes both into its ca.crt. The kubelet reloads its
// --client-ca-file when the file changes (a dynamic CA file provider), but
// nothing rewrites that file on a joined node, and the CA in its
// kubeconfig is read once at start: hence the cross-signed chain rather
// than new trust on the nodes. The kubelet's client certificate rotation
// (a CSR at 70-90% of its lifetime, signed by the controller manager's
// kubelet client signer) is what moves each node to the new CA at its own
// pace. Gardener's rotation, by contrast, leaves the exchange of CA
// bundles to its users between a Preparing and a Completing phase that
// they start.
//
// Every phase is rendered from the status alone (and, for the last one of
// the service account key or a CA, from what <cluster>-sa or the CA's
// Secret holds), so a controller that restarts in the middle renders the
// same pods and carries on.
package rotation
