// Package render is what every component of a hosted control plane renders
// from and with. The Input is built once per pass, from the control plane,
// its Cluster, the controller's settings and what the controller observed
// (where the control plane is served, what the Secrets its pods mount hold);
// it is a value that rendering only reads. The building blocks (labels and
// owner references, hardened pods and containers, flags, images,
// certificates, network policies) make every component's objects alike.
//
// Nothing here reads a cluster: the same Input always renders the same
// objects, byte for byte, so that an upgrade of the controller never rolls a
// control plane by accident.
package render
