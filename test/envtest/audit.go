package envtest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Write is one write request the API server accepted or refused.
type Write struct {
	Verb      string
	User      string
	UserAgent string
	Resource  string
	Name      string
	Code      int
	At        time.Time
}

func (w Write) String() string {
	return fmt.Sprintf("%s %s/%s by %s (%d)", w.Verb, w.Resource, w.Name, w.User, w.Code)
}

// configureAPIServer makes the API server log every write, so tests can
// count what a component wrote, and gives it a large service network.
func (e *Env) configureAPIServer() error {
	flags, err := AuditFlags(e.dir)
	if err != nil {
		return err
	}
	e.auditLog = flags["audit-log-path"]
	api := e.env.ControlPlane.GetAPIServer().Configure().
		// Room for hundreds of control planes' Services (envtest's default
		// range has 254 addresses).
		Set("service-cluster-ip-range", "10.0.0.0/16")
	for name, value := range flags {
		api.Set(name, value)
	}
	return nil
}

// AuditFlags are the kube-apiserver flags that log every write into
// dir/audit.log, which ReadWrites reads.
func AuditFlags(dir string) (map[string]string, error) {
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(`apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  verbs: [create, update, patch, delete, deletecollection]
`), 0o600); err != nil {
		return nil, err
	}
	return map[string]string{
		"audit-policy-file": policy,
		"audit-log-path":    filepath.Join(dir, "audit.log"),
		"audit-log-mode":    "blocking",
	}, nil
}

// Writes are the writes user made since a time, oldest first.
func (e *Env) Writes(user string, since time.Time) ([]Write, error) {
	all, err := ReadWrites(e.auditLog, since)
	var writes []Write
	for _, w := range all {
		if w.User == user {
			writes = append(writes, w)
		}
	}
	return writes, err
}

// ReadWrites are the writes in an audit log since a time, oldest first.
func ReadWrites(auditLog string, since time.Time) ([]Write, error) {
	f, err := os.Open(auditLog)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var writes []Write
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 1<<20)
	for scanner.Scan() {
		var ev struct {
			Verb      string
			UserAgent string
			User      struct{ Username string }
			ObjectRef struct {
				Resource, Subresource, Name string
			}
			ResponseStatus           struct{ Code int }
			RequestReceivedTimestamp time.Time
		}
		if err := json.Unmarshal(scanner.Bytes(), &ev); err != nil {
			return nil, fmt.Errorf("audit log: %w", err)
		}
		if ev.RequestReceivedTimestamp.Before(since) {
			continue
		}
		resource := ev.ObjectRef.Resource
		if ev.ObjectRef.Subresource != "" {
			resource += "/" + ev.ObjectRef.Subresource
		}
		writes = append(writes, Write{ev.Verb, ev.User.Username, ev.UserAgent, resource, ev.ObjectRef.Name, ev.ResponseStatus.Code, ev.RequestReceivedTimestamp})
	}
	return writes, scanner.Err()
}
