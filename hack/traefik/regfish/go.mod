module github.com/regfish/regfish-dnsapi-go

go 1.24.0
