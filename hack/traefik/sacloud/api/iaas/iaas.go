// Package iaas forwards the part of SAKURA Cloud's IaaS client that lego's
// sakuracloud DNS provider uses to github.com/sacloud/iaas-api-go, the
// module the SDK's api/iaas directory was merged from. The module proxy
// serves iaas-api-go but not the SDK release lego v5.4.1 names.
package iaas

import (
	client "github.com/sacloud/api-client-go"
	upstream "github.com/sacloud/iaas-api-go"
	updefaults "github.com/sacloud/iaas-api-go/defaults"

	"github.com/sacloud/sacloud-sdk-go/api/iaas/defaults"
)

type (
	APICaller                = upstream.APICaller
	Client                   = upstream.Client
	DNSAPI                   = upstream.DNSAPI
	DNS                      = upstream.DNS
	DNSRecord                = upstream.DNSRecord
	DNSRecords               = upstream.DNSRecords
	DNSUpdateSettingsRequest = upstream.DNSUpdateSettingsRequest
	FindCondition            = upstream.FindCondition
)

// The settings a caller may change before it makes its DNS client; NewDNSOp
// hands them to iaas-api-go, whose variables of the same names are the ones
// its clients read.
var (
	SakuraCloudAPIRoot = upstream.SakuraCloudAPIRoot
	SakuraCloudZones   = upstream.SakuraCloudZones
	APIDefaultZone     = upstream.APIDefaultZone
	DefaultUserAgent   = upstream.DefaultUserAgent
)

// NewClientWithOptions is iaas-api-go's.
func NewClientWithOptions(opts *client.Options) *Client { return upstream.NewClientWithOptions(opts) }

// NewDNSOp applies the settings above, then returns iaas-api-go's DNS client.
func NewDNSOp(caller APICaller) DNSAPI {
	upstream.SakuraCloudAPIRoot = SakuraCloudAPIRoot
	upstream.SakuraCloudZones = SakuraCloudZones
	upstream.APIDefaultZone = APIDefaultZone
	upstream.DefaultUserAgent = DefaultUserAgent
	updefaults.DefaultStatePollingTimeout = defaults.DefaultStatePollingTimeout
	return upstream.NewDNSOp(caller)
}

// IsNotFoundError is iaas-api-go's.
func IsNotFoundError(err error) bool { return upstream.IsNotFoundError(err) }
