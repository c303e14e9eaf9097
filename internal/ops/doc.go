// Package ops serves ehsink's operations HTTP API on one listener:
// Prometheus metrics, liveness and readiness probes, the status of each
// connector, pause, resume and restart, and optionally Go's profiler.
//
// [Routes] lists the routes; docs/operations.md documents each and a test keeps
// the two in step. The API has no authentication: bind it to loopback
// (the default) or to an address only trusted clients reach.
package ops
