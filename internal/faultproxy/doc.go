// Package faultproxy is a TCP proxy that puts network faults between
// ehsink and one of its dependencies (PostgreSQL, Blob Storage, Event
// Hubs), for tests and the chaos matrix. It uses the standard library only.
//
// A [Proxy] forwards every connection made to its address to the target.
// [Proxy.Set] changes the fault of every connection, open or new:
//
//   - Blackhole: nothing more is forwarded either way, and nothing is
//     closed: the connections are half-open, as behind a NAT or firewall
//     that dropped the flow, or a host that failed over. New connections
//     are accepted (the listener's kernel completes the handshake) and
//     hang. Data read meanwhile is held and delivered after the heal, as
//     TCP retransmits it after a partition ends.
//   - BlackholeOn: forward until the client sends a chunk containing the
//     given bytes (a COMMIT, say), then blackhole from that chunk on: a
//     partition in the middle of a transaction. BlackholeOnReply does the
//     same on what the target sends (PostgreSQL's ReadyForQuery in a
//     transaction: the server is then idle in it). A pattern split across
//     two reads is not seen.
//   - Reset: every open connection is closed with a RST (SO_LINGER 0), and
//     new ones are reset at once.
//   - Latency: each chunk is delayed that long in each direction.
//   - Bandwidth: each direction of each connection is limited to that many
//     bytes per second.
//
// The proxy works above the kernel: its own TCP still acknowledges what
// the client sends, so a blackhole shows the client a peer that stopped
// answering, which the client's operation deadlines must notice; TCP
// keepalives and TCP_USER_TIMEOUT, which notice a path that drops
// packets, are not exercised by it.
package faultproxy
