package netdial

import (
	"net"
	"net/http"
	"time"
)

// Bounds of a half-open connection; see the package doc.
const (
	// KeepAliveIdle is the silence after which keepalive probes start.
	KeepAliveIdle = 5 * time.Second
	// KeepAliveInterval is the time between keepalive probes.
	KeepAliveInterval = time.Second
	// KeepAliveCount is how many unanswered probes close the connection
	// where TCP_USER_TIMEOUT is not available.
	KeepAliveCount = 5
	// UserTimeout is how long written data (or a keepalive probe) may stay
	// unacknowledged before the kernel closes the connection (Linux).
	UserTimeout = 10 * time.Second
	// ConnectTimeout bounds a dial: a SYN into a blackhole is otherwise
	// retried for over two minutes.
	ConnectTimeout = 10 * time.Second
)

// Dialer returns a dialer whose TCP connections carry the keepalive and
// user-timeout settings of the package doc. Non-TCP networks (a PostgreSQL
// Unix socket) are dialed as net.Dialer would.
func Dialer() *net.Dialer {
	return &net.Dialer{
		Timeout: ConnectTimeout,
		KeepAliveConfig: net.KeepAliveConfig{
			Enable:   true,
			Idle:     KeepAliveIdle,
			Interval: KeepAliveInterval,
			Count:    KeepAliveCount,
		},
		Control: control,
	}
}

// HTTPClient returns an HTTP client for the Azure SDKs (their
// policy.Transporter) whose connections are dialed by [Dialer]. Its other
// settings are http.DefaultTransport's.
func HTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = Dialer().DialContext
	return &http.Client{Transport: t}
}
