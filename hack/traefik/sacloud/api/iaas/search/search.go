// Package search forwards iaas-api-go's search filters.
package search

import upstream "github.com/sacloud/iaas-api-go/search"

type (
	Filter          = upstream.Filter
	FilterKey       = upstream.FilterKey
	EqualExpression = upstream.EqualExpression
)

// Key is iaas-api-go's.
func Key(field string) FilterKey { return upstream.Key(field) }

// ExactMatch is iaas-api-go's.
func ExactMatch(conditions ...string) *EqualExpression { return upstream.ExactMatch(conditions...) }
