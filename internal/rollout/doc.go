// Package rollout decides when a hosted pod may restart: an upgrade of the
// controller restarts none.
//
// What the controller renders for a control plane is a function of its spec,
// its Cluster, what it observed (the Secrets the pods mount, etcd's members)
// and the controller itself: its release and its settings. A pod restarts
// when its workload's pod template changes. A change of the spec or of what
// was observed rolls at once, as before; a change that comes from the
// controller alone (a new release renders a flag differently, the platform
// sets another TUNNEL_IMAGE) waits for the next rollout the user starts, as
// Cluster API's KubeadmControlPlane rolls Machines only when its spec changes
// or spec.rollout.after is reached.
//
// Every workload (Deployment, StatefulSet, DaemonSet) the controller renders
// carries a Stamp in its annotations: the renderer that rendered it (the
// release and a digest of the settings, RenderedByAnnotation), the
// generation and a digest of the spec it was rendered from, and the
// RenderingLevel of the release. When the rendering of a workload that
// exists changes, the change is applied at once when
//
//   - the same renderer stamped it (the change is the spec's or an
//     observation's), or
//   - a key rotation the user asked for moved to another step
//     (RotationAnnotation, on the workloads whose pods use the key), or
//   - the spec changed since (its generation and its digest both: CRD
//     defaults that a newer release adds change the spec as read, never its
//     generation; setting spec.rollout.after changes the generation only),
//     or
//   - its pod template stays as it is (the API server's dry run says so),
//     so that only the workload's own metadata changes, or
//   - the change was held before and what the pods depend on changed
//     while it was (the pod template the same renderer renders moved): the
//     pods restart then anyway, and take the new rendering along;
//
// otherwise it waits, and the control plane's status.rollout.pending names
// the workload and the fields of its pod template that would change. A
// release that raises contract.RenderingLevel marks its change as one that
// must roll: workloads of a lower level roll, one control plane at a time
// across the fleet, at most one start per interval the platform sets (Gate).
//
// spec.rollout.after, once reached, is written into every pod template
// (RestartedAtAnnotation), as `kubectl rollout restart` writes its own: the
// pods restart with the newest rendering, whether or not one was pending.
package rollout
