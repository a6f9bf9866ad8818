// Command coredns is CoreDNS of the release go.mod pins, built with the
// plugins the local cluster's Corefiles use (the management cluster's DNS
// with its Gateway zone, and the Corefile the controller renders for each
// workload cluster, as kubeadm's) and a few common ones, instead of all of
// CoreDNS's: the cloud DNS plugins alone (Azure, Cloud DNS, Route 53) pull
// in SDKs that cost minutes of every cold build. CoreDNS documents such
// builds; a plugin missing here fails at startup naming its directive.
package main

import (
	"github.com/coredns/coredns/coremain"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/file"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/hosts"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
	_ "github.com/coredns/coredns/plugin/rewrite"
	_ "github.com/coredns/coredns/plugin/template"
)

func main() { coremain.Run() }
