// Package defaults holds the IaaS client default lego's sakuracloud provider
// changes; iaas.NewDNSOp hands it to github.com/sacloud/iaas-api-go.
package defaults

import upstream "github.com/sacloud/iaas-api-go/defaults"

// DefaultStatePollingTimeout is how long state polling waits.
var DefaultStatePollingTimeout = upstream.DefaultStatePollingTimeout
