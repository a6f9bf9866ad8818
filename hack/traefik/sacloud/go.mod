module github.com/sacloud/sacloud-sdk-go

go 1.25.0

require (
	github.com/sacloud/api-client-go v0.3.5
	github.com/sacloud/iaas-api-go v1.29.2
)
