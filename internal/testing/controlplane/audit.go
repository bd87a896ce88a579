package controlplane

import (
	"os"
	"path/filepath"
)

// auditPolicy records every request when its response is complete, and a
// long-running one (a watch) also when its response starts, so that a watch
// is on record while it runs; with its user, verb and object reference but no
// request or response bodies: nothing a Secret holds reaches the log.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
`

// configureAudit writes the audit policy and points the API server at it and
// at <WorkDir>/audit.log. The log backend blocks on each write, so an event
// is on disk when its response has been sent; it is never rotated.
func (cp *ControlPlane) configureAudit() error {
	policy := filepath.Join(cp.WorkDir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return err
	}
	cp.AuditLogPath = filepath.Join(cp.WorkDir, "audit.log")
	args := cp.env.ControlPlane.APIServer.Configure()
	args.Set("audit-policy-file", policy)
	args.Set("audit-log-path", cp.AuditLogPath)
	args.Set("audit-log-mode", "blocking")
	args.Set("audit-log-format", "json")
	args.Set("audit-log-maxsize", "0")
	return nil
}
