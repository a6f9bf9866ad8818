// Package program is what the two binaries' main functions share: read the
// settings (a bad one ends the process with status 2 and a message naming
// it), build the logger, set GOMEMLIMIT from the container's memory limit,
// find the management cluster, set up tracing and the
// metrics server, and run until SIGTERM or SIGINT.
package program
