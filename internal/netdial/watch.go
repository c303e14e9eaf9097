package netdial

import (
	"net"
	"sync/atomic"
)

// WatchedConn is a connection that tells a listener each time it moves
// bytes: a read that returned data, or a write that the path took. Its
// owner changes the listener as the connection passes from one operation
// to the next (a pooled database session), so that an operation's
// deadline can tell a path that answers slowly from one that does not
// answer: a half-open path reads nothing, and once its buffers are full
// takes no more writes either. Safe for concurrent use.
type WatchedConn struct {
	net.Conn
	notify atomic.Pointer[func()]
}

// Watch wraps c. It reports to no one until Notify.
func Watch(c net.Conn) *WatchedConn { return &WatchedConn{Conn: c} }

// Notify makes fn the listener (nil: none).
func (c *WatchedConn) Notify(fn func()) {
	if fn == nil {
		c.notify.Store(nil)
		return
	}
	c.notify.Store(&fn)
}

func (c *WatchedConn) moved() {
	if fn := c.notify.Load(); fn != nil {
		(*fn)()
	}
}

func (c *WatchedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.moved()
	}
	return n, err
}

func (c *WatchedConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if n > 0 {
		c.moved()
	}
	return n, err
}

// Watched returns the WatchedConn under c: c itself, or the connection a
// TLS client (or any wrapper with a NetConn method) runs over.
func Watched(c net.Conn) (*WatchedConn, bool) {
	for c != nil {
		if w, ok := c.(*WatchedConn); ok {
			return w, true
		}
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return nil, false
		}
		c = u.NetConn()
	}
	return nil, false
}
