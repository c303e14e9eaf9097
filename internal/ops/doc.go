// Package ops serves ehsink's operations HTTP API on one listener:
// Prometheus metrics, liveness and readiness probes, the status of each
// connector (its dead letters counted), pause, resume, restart and the
// replay of its dead letters, and optionally Go's profiler.
//
// [Routes] lists the routes; docs/operations.md documents each and a test keeps
// the two in step.
//
// The routes that change something (every POST: pause, resume, restart,
// replay) are guarded twice. [http.CrossOriginProtection] refuses
// requests a browser marks as coming from another site's page. Then the caller must
// present the bearer token of [Options.Token] (compared in constant time);
// with no token configured, they are served only on a loopback listener,
// to requests whose Host is a loopback name, and refused with 403
// elsewhere. Each such request gets an audit line. The probes, /metrics
// and the read-only status stay open: kubelet and Prometheus carry no
// token.
package ops
