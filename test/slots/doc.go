// Package slots lets tests that called t.Parallel run, as many at once as a
// Slots has, in the order of a ranking, longest first: started so, the long
// ones do not end up alone at the end of a suite. A test that changes
// something the others rely on claims it (Changes) and runs beside none of
// those that use it (Uses). The end-to-end suite (test/e2e) bounds its
// tests so, and the envtest suite (test/envtest) the ones that run hosted
// API servers as processes.
package slots
