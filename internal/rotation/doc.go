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
// Every phase is rendered from the status alone (and, for the last one of
// the service account key, from what <cluster>-sa holds), so a controller
// that restarts in the middle renders the same pods and carries on.
package rotation
