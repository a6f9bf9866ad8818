// Package etcd checks a hosted etcd cluster from the management cluster, the
// way an operator would before touching it: every member answers, a leader
// exists, no alarm is raised and no database is close to its quota.
//
// It finds the members through the EndpointSlices of the cluster's etcd
// client Service, dials each one by address with the health-check client
// certificate the controller keeps in a Secret, and verifies the servers'
// certificates against the Service's DNS name. Clients are cached per cluster
// and certificate, so repeated checks reuse their connections, and every
// call is bounded by a timeout.
package etcd
