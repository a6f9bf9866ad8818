package backup

import (
	"errors"
	"fmt"
	"strings"

	"github.com/hostedcp/cluster-api-provider-hosted/api/v1alpha1"
	"github.com/hostedcp/cluster-api-provider-hosted/internal/components/etcd"
)

// problemError is a failure with the BackupReady reason that names it.
type problemError struct {
	reason  string
	message string
}

func (p *problemError) Error() string { return p.message }

func problem(reason, format string, args ...any) error {
	return &problemError{reason: reason, message: fmt.Sprintf(format, args...)}
}

// reasonOf is the BackupReady reason of a failure.
func reasonOf(err error) string {
	var p *problemError
	switch {
	case errors.As(err, &p):
		return p.reason
	case errors.Is(err, etcd.ErrNoMember):
		return v1alpha1.EtcdUnavailableReason
	default:
		return v1alpha1.SnapshotFailedReason
	}
}

// sanitizeCode keeps what an S3 error code may hold (letters and digits),
// so that a store cannot make a message say anything else.
func sanitizeCode(code string) string {
	code = strings.Map(func(r rune) rune {
		if r < '0' || r > 'z' || (r > '9' && r < 'A') || (r > 'Z' && r < 'a') {
			return -1
		}
		return r
	}, code)
	if len(code) > 64 {
		code = code[:64]
	}
	return code
}
