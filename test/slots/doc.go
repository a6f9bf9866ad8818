// Package slots lets tests that called t.Parallel run, as many at once as a
// Slots has, in the order of a ranking, longest first: started so, the long
// ones do not end up alone at the end of a suite. Tests that would break
// each other name a group they share, and never run beside each other. The
// end-to-end suite (test/e2e) bounds its tests so, and the envtest suite
// (test/envtest) the ones that run hosted API servers as processes.
package slots
