// Package logging builds the zap-backed logr.Logger both binaries log with,
// as JSON for log collectors or as text for people.
package logging
