// Package source reads an event hub through the azeventhubs/v2 SDK
// [azeventhubs.Processor] and hands each owned partition to a handler.
//
// Load balancing is the SDK's: replicas that share a consumer group and a
// checkpoint store split the partitions between them through ownership
// leases in the store. This package adds what the SDK leaves to the
// application:
//
//   - a fail-fast [New] that names the cause (bad connection string, unknown
//     event hub, missing consumer group) instead of a retry loop;
//   - start positions from configuration (earliest, latest, an enqueued
//     time, seq:N, per partition), used only when nothing was committed;
//   - the resume position, the later of the store's checkpoint and the sink's
//     own committed watermark ([Options.Claim], which opens the sink's
//     writer once per claim and hands it to the handler through
//     [Partition.TakeOpened]; or [Options.Watermark], which reads it only);
//   - an explicit policy for checkpoints that point at positions that no
//     longer exist ([Options.OnInvalidCheckpoint]);
//   - [ErrOwnershipLost] from [Partition.Receive] and [Partition.Checkpoint]
//     once another replica took the partition, so that the caller abandons
//     its batch instead of checkpointing after losing;
//   - liveness: a claim never stalls on a resume position that cannot be
//     worked out (its lease is given up and the next claim tries again), and
//     a watchdog heals a partition owned with no reader (the processor is
//     restarted) or a reader that stopped ([Partition.Heartbeat]; its
//     context is cancelled and the partition reopened), see [Options.OnHeal].
//
// Goroutines: [Source.Run] runs the SDK processor (one at a time; a new one
// after a restart) and the watchdog in their own goroutines, and each
// handler in its own goroutine, and returns only after all of them ended.
package source
