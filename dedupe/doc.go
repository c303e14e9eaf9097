// Package dedupe is what makes a writer effectively-once on top of
// at-least-once delivery, in one place for the runner, the built-in sinks
// and custom ones:
//
//   - the watermark comparisons: [Covers], [Later], and [After], which
//     drops what a watermark already covers from a batch (a replay after a
//     crash or an ownership move);
//   - the fence: the same [After], called inside the commit with the
//     watermark read there, drops what a second owner of the partition
//     committed meanwhile; a writer that cannot drop part of what it holds
//     (one file already named for the whole range) returns
//     [github.com/ehsink/ehsink/sinks.ErrFenced] instead;
//   - [Collapse], the in-batch key collapse of upsert sinks: only the
//     newest value of a key matters, and some destinations refuse to touch
//     one row twice in one statement.
//
// The watermark is kept with the data (same transaction, same file name),
// so that it is exactly what the destination holds.
package dedupe
