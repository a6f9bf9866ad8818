// Package readiness says how far a component of a control plane is: ready,
// waiting for something (with the reason and message its condition shows),
// or in a bad situation worth an event. It also holds the one rule by which
// a Deployment or DaemonSet has rolled out, which every component that runs
// one is judged by, in the management cluster and in workload clusters.
package readiness
