// Package netfail tells why a network request got no answer without
// quoting the request. Go's errors name the address dialled and the URL
// asked for; where those came from a Secret (an S3 endpoint) or carry a
// credential (a presigned URL's signature), they must not reach a
// condition, an event or a log, and Describe's words are what is left to
// say.
package netfail
