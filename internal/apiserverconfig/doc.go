// Package apiserverconfig builds the files the API server reads for the
// features a control plane's spec configures (structured authentication
// from spec.oidcProviders, the audit policy of
// spec.deployment.apiServer.audit), and validates them with the API
// server's own code, so that admission refuses what the API server would
// refuse to load, and names the field of the control plane at fault.
package apiserverconfig
