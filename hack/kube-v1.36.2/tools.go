//go:build tools

// Package kube records the upstream commands this module builds, so that
// go mod tidy keeps their dependencies: the control plane components whose
// images the patch-upgrade test starts from.
package kube

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
