// Package emulator is an in-process Azure Event Hubs emulator: an AMQP 1.0
// server that the real azeventhubs/v2 SDK talks to over plain TCP with a
// connection string ending in UseDevelopmentEmulator=true, and that SDKs
// without an emulator mode reach over AMQPS (Config.TLS, tls.go). With
// keys or policies it verifies tokens and authorizes links as the
// service does (auth.go). Start listens by itself; New plus Serve embeds
// the server on listeners of the caller's.
//
// Layers (STYLE.md §12):
//   - emulator/internal/amqp: the pure codec (types, frames, performatives), no I/O.
//   - conn.go, session.go, link.go: one connection's state. Each connection
//     has a read goroutine that owns protocol processing, a write goroutine
//     that owns the socket's write side and sends heartbeats, and one
//     delivery goroutine per receiver link. conn.mu guards sessions and
//     links; the output buffer has its own lock (lock order: conn.mu, then
//     conn.outMu).
//   - node_*.go: one file per addressable node ($cbs, $management, event
//     hub senders, partition receivers), each headed by a Behavior comment.
//   - server.go, admin.go, tls.go: lifecycle (New, Start, Serve, Shutdown),
//     the AMQPS listener, fault injection and the loopback admin HTTP server.
//   - schemaregistry.go: Azure Schema Registry and Confluent-compatible
//     routes over HTTPS (Config.SchemaRegistryAddr); their store is
//     emulator/internal/schemas.
//
// Hub state (partitions, sequence numbers, epochs, persistence) lives in
// emulator/internal/hub; this package maps it onto the wire.
//
// Start an emulator in a test:
//
//	srv, err := emulator.Start(ctx, emulator.Config{Hubs: []emulator.HubConfig{{Name: "orders", Partitions: 4}}})
//	if err != nil { t.Fatal(err) }
//	t.Cleanup(func() { srv.Shutdown(context.Background()) })
//	producer, err := azeventhubs.NewProducerClientFromConnectionString(srv.ConnectionString("orders"), "", nil)
package emulator
