package contract

// Release is the release of this build, such as v0.2.0; `make release`
// stamps it (-ldflags -X). A control plane's workloads record the release
// that rendered them (see internal/rollout).
var Release = "dev"

// RenderingLevel is raised by one by a release whose change to what control
// planes render must reach every running control plane, such as a security
// fix, in the same commit as the change, with the reason in
// RenderingLevelReason. Workloads rendered at a lower level roll one control
// plane at a time across the fleet (MUST_ROLL_INTERVAL); every other change
// of the rendering waits for a rollout the user starts.
const RenderingLevel = 0

// RenderingLevelReason says why the last raise of RenderingLevel must roll.
const RenderingLevelReason = ""
