// Package emulator is an in-process Azure Event Hubs emulator: an AMQP 1.0
// server that the real azeventhubs/v2 SDK talks to over plain TCP with a
// connection string ending in UseDevelopmentEmulator=true.
//
// Layers (STYLE.md §12):
//   - emulator/amqp: the pure codec (types, frames, performatives), no I/O.
//   - conn.go, session.go, link.go: one connection's state. Each connection
//     has a read goroutine that owns protocol processing, a write goroutine
//     that owns the socket's write side and sends heartbeats, and one
//     delivery goroutine per receiver link. conn.mu guards sessions and
//     links; the output buffer has its own lock (lock order: conn.mu, then
//     conn.outMu).
//   - node_*.go: one file per addressable node ($cbs, $management, event
//     hub senders, partition receivers), each headed by a Behavior comment.
//   - server.go, admin.go: lifecycle (Start, Shutdown), fault injection and
//     the loopback admin HTTP server.
//
// Hub state (partitions, sequence numbers, epochs, persistence) lives in
// emulator/hub; this package maps it onto the wire.
//
// Start an emulator in a test:
//
//	srv, err := emulator.Start(ctx, emulator.Config{Hubs: []emulator.HubConfig{{Name: "orders", Partitions: 4}}})
//	if err != nil { t.Fatal(err) }
//	t.Cleanup(func() { srv.Shutdown(context.Background()) })
//	producer, err := azeventhubs.NewProducerClientFromConnectionString(srv.ConnectionString("orders"), "", nil)
package emulator
