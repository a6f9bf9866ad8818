package readiness

import (
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
)

// Outcome is how far a component, or a phase of a pass, is: done, or what is
// missing, said in the reason and message of its condition.
type Outcome struct {
	Done bool
	// Warn marks a bad situation worth an event and a retry with backoff,
	// not just progress.
	Warn bool
	// Poll marks a wait that no watched object ends, so the pass looks
	// again after a while.
	Poll            bool
	Reason, Message string
}

// Ready is a done outcome.
func Ready(message string) Outcome {
	return Outcome{Done: true, Reason: v1alpha1.ReadyReason, Message: message}
}

// Waiting is progress: something is on its way.
func Waiting(reason, format string, args ...any) Outcome {
	return Outcome{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// Problem is a bad situation that waiting alone may not end.
func Problem(reason, format string, args ...any) Outcome {
	return Outcome{Warn: true, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// RollingOut is the outcome of a component whose workloads were just
// changed: the cache still shows the old objects, whose status says nothing
// about the new spec.
func RollingOut(what string) Outcome {
	return Waiting(v1alpha1.ProgressingReason, "rolling out the new spec of %s", what)
}

// Applied is what the controller applied of a component in a pass.
type Applied struct {
	Objects []client.Object
	// Wrote tells whether applying changed anything.
	Wrote bool
}
