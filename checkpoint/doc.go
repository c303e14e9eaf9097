// Package checkpoint holds ehsink's checkpoint stores and the resume-position
// merge. Every store implements [azeventhubs.CheckpointStore], so the SDK's
// Processor uses it for ownership leases and the runner for checkpoints.
//
//   - [FileStore] keeps checkpoints and ownership in a local directory, with
//     the blob layout of the Azure SDKs. Ownership claims are compare-and-swap
//     on an ETag, correct across goroutines and across processes on one
//     machine (an OS file lock guards each read-compare-write). It is the
//     embedded default.
//   - [BlobStore] is the SDK's own checkpoints.BlobStore over Azure Blob
//     Storage (or Azurite), with the container created when missing.
//   - [Lowercase] wraps either store so that blob and file names use the
//     lowercase namespace, event hub and consumer group, as the .NET, Java,
//     JavaScript and Python SDKs and KEDA do, and migrates state found under
//     the as-written names that the Go SDK uses.
//   - [AliasNamespace] keeps one namespace's state under another name (the
//     in-process emulator's address changes every run).
//   - [Resume] is the merge rule of a checkpoint and a sink's own committed
//     watermark (the later wins), so a restarted connector never re-reads
//     what its sink already holds; package source applies it when the SDK's
//     Processor asks where a newly claimed partition starts.
//
// Checkpoints written through any of these stores must carry both a sequence
// number and an offset: the SDK's blob store cannot list a checkpoint blob
// without an offset, so the stores refuse such a checkpoint up front.
package checkpoint
