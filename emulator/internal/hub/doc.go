// Package hub is the storage and semantics layer of the Event Hubs emulator:
// namespaces, hubs, partitions with their logs, consumer groups, receivers
// with epoch ownership, retention and persistence. It knows nothing of AMQP
// bytes or the network; package emulator translates links and frames into
// calls on this package. It uses only the standard library.
//
// # Model
//
// A [Namespace] (from [Open]) holds [Hub]s; a hub has N partitions ("0" to
// "N-1") and consumer groups ("$Default" always). [Hub.Append] stores a
// batch of encoded inner AMQP messages verbatim as consecutive events of one
// partition. Each event gets a sequence number (per partition, from 0, +1 per
// event), an offset (the decimal byte position of its record in the
// partition's record stream: unique, strictly increasing, never "-1") and an
// enqueued time (unix ms, never decreasing within a partition).
// [Hub.OpenReceiver] opens a [Receiver] at a [StartPosition] (see
// [ParseSelector]) under the owner-level (epoch) rules; [Receiver.Next] blocks
// for events and tails the partition live. Failures that the protocol layer
// forwards to clients are [*Error] values carrying an AMQP condition.
//
// # Storage
//
// Each partition is a list of segments of framed records (length, CRC-32C,
// sequence number, enqueued time, partition key, message; see record.go).
// Without [Config.DataDir] segments are byte chunks in memory (at most 1 MiB;
// 26 bytes of overhead per event plus the key and about 1 byte of index:
// BenchmarkAppendNext measures about 228 heap bytes per retained 200-byte
// event). With a DataDir each
// segment is a file DataDir/<hub>/<partition>/<base offset, 20 digits>.seg
// starting with a 44-byte header; a new segment starts when the current one
// reaches [Config.SegmentBytes]. Every segment keeps a sparse in-memory index
// (one entry per 4 KiB of records); messages on disk are read back with pread
// and are not kept in memory. Open rebuilds the index by scanning the files;
// a torn or corrupt record at the end of the last segment (a crash during an
// append) is truncated away and never served. DataDir/<hub>/hub.json holds the
// hub's creation time. Only one Namespace may use a DataDir at a time.
//
// Retention ([Config.Retention] by age, [Config.RetentionBytes] by size)
// moves a partition's first retained sequence number forward event by event;
// whole segments are then released (files deleted) once none of their events
// is retained. The last segment is always kept. After a restart, retention is
// applied again from the records' enqueued times and sizes.
//
// # Goroutines, ownership and locks
//
//   - Open starts at most one goroutine, Namespace.background, which applies
//     retention every Config.RetentionCheckEvery and syncs written partitions
//     every Config.FsyncEvery (FsyncInterval). Close stops it and waits.
//   - Namespace fields are read-only after Open, except busyUntil (atomic)
//     and the close machinery. Hub fields are read-only except the
//     round-robin counter (atomic).
//   - partition.mu guards the partition's log state (segments list, next,
//     begin and last positions, segment counters and indexes, the active
//     segment's growing data), its receivers' ownership groups, and each of
//     its receivers' closed/err state. Append holds it for a whole batch
//     (encoding, the write system call, and the fsync for FsyncAlways).
//   - Readers take a snapshot under partition.mu and decode outside it:
//     records are append-only, so bytes below a snapshotted size never
//     change. Memory events alias the segment chunks (no copy); disk reads
//     pin the segment file with a reference count so that retention or Close
//     closes (and deletes) it only after the last reader is done.
//   - Readers wait on partition.notify, a channel that Append closes (a
//     broadcast) and that the next waiter replaces; no polling.
//   - Receiver.readMu serializes Next on one receiver and guards the read
//     cursor and scratch buffers.
//
// Lock order: Receiver.readMu, then partition.mu. No code holds two
// partitions' locks, and no lock is held while OnDetach runs.
package hub
