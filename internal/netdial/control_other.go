//go:build !linux

package netdial

import "syscall"

// control does nothing where TCP_USER_TIMEOUT does not exist: keepalives
// (KeepAliveCount unanswered probes) bound idle connections alone there.
func control(string, string, syscall.RawConn) error { return nil }
