// Package apply keeps objects as rendered: it server-side applies a desired
// object under one field manager only when the object differs from it, never
// takes over an object someone else created, and prunes what is no longer
// rendered. An object that already matches costs a cache read and no write.
package apply
