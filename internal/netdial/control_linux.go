package netdial

import (
	"fmt"
	"strings"
	"syscall"
)

// tcpUserTimeout is TCP_USER_TIMEOUT from linux/tcp.h; package syscall
// does not define it.
const tcpUserTimeout = 0x12

// control sets TCP_USER_TIMEOUT on a TCP socket before it connects, so that
// the bound also covers the handshake's first data.
func control(network, _ string, c syscall.RawConn) error {
	if !strings.HasPrefix(network, "tcp") {
		return nil
	}
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpUserTimeout, int(UserTimeout.Milliseconds()))
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("netdial: set TCP_USER_TIMEOUT on %s socket: %w", network, err)
	}
	return nil
}
