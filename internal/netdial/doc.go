// Package netdial dials the TCP connections of ehsink's network
// dependencies (PostgreSQL, Blob Storage, Event Hubs) so that a dead path is noticed in
// seconds rather than in the hours the kernel's defaults take.
//
// A path that drops packets without a reset (a NAT or firewall that timed
// the flow out, a failed-over host, a dead load balancer) leaves the
// connection half-open: nothing fails, reads and writes just never finish.
// Two socket settings bound that:
//
//   - TCP keepalive probes after [KeepAliveIdle] of silence, every
//     [KeepAliveInterval]: an idle connection (a pooled PostgreSQL session,
//     a kept-alive HTTP connection) whose peer is gone is closed instead of
//     being handed out to the next operation.
//   - TCP_USER_TIMEOUT ([UserTimeout], Linux): data written but not
//     acknowledged for that long (and keepalive probes unanswered for that
//     long) closes the connection with ETIMEDOUT. Without it a write to a
//     half-open connection is retransmitted for about 15 minutes.
//
// So a connection whose path dies is closed by the kernel within about
// [UserTimeout] when it has data in flight, and within [KeepAliveIdle] +
// [UserTimeout] when idle. These work below the application: a peer that
// still acknowledges packets but never answers (a stuck server, a proxy
// that stops forwarding) is caught by the deadline each operation carries,
// not here.
package netdial
