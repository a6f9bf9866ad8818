// Package api forwards iaas-api-go's caller options.
package api

import (
	client "github.com/sacloud/api-client-go"
	upstream "github.com/sacloud/iaas-api-go/helper/api"
)

type (
	CallerOptions = upstream.CallerOptions
	ClientOptions = client.Options
)

// DefaultOption is iaas-api-go's: options from the environment and profile.
func DefaultOption() (*CallerOptions, error) { return upstream.DefaultOption() }

// MergeOptions is iaas-api-go's.
func MergeOptions(opts ...*CallerOptions) *CallerOptions { return upstream.MergeOptions(opts...) }
