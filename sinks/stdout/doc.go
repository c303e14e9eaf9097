// Package stdout is the stdout sink: each event becomes one line, either a
// JSON envelope with the event's metadata or the raw body.
//
// Each partition writer gathers its lines in its own buffer and hands the
// whole buffer to the shared output under a lock at Flush, so lines of two
// partitions never interleave inside one line. The sink keeps no watermark
// (a terminal cannot be read back): after a crash, events between the last
// checkpoint and the crash are printed again.
package stdout
