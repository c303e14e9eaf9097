// Package parquet is the ehsink sink that writes events to Parquet files,
// in a local directory or an Azure Blob container, with effectively-once
// output. Importing it registers the sink type "parquet".
//
// # Files
//
// Each partition gathers its events in one open file. The runner asks
// [sinks.Batcher] FlushDue after each batch; the file rolls (is committed)
// when it holds max_rows rows, its estimated size reaches max_bytes, or its
// first event was taken max_age ago. Flush commits it and returns the new
// watermark, which the runner then checkpoints; batches between rolls are
// not checkpointed. A file's name comes from the path template, by default
//
//	{eventhub}/partition={partition}/date={enqueued_date}/{partition}-{first_seq:020}-{last_seq:020}.parquet
//
// so it is a function of the partition and the sequence range it covers:
// a replay of the same range produces the same name, and a name is
// published once (see Commits). The folder comes from the file's
// first event.
//
// # Commits
//
// A file is never half-visible, and a range is published once. In a local
// directory it is written under a hidden temporary name (.ehsink-*.tmp) in
// its final folder and fsynced; in Blob Storage it is spooled to a local
// file while written and uploaded as staged blocks (the blob's name holds
// the last sequence number, known only at commit, and staged blocks cannot
// move between blob names). Then the writer claims the commit: it creates
// _ehsink_claims/{connector}-p{partition}/{layout}/{next}.json, where next
// is the sequence number after the watermark the file extends, only if it
// does not exist (link(2) locally, If-None-Match: * on Blob). A second
// owner of the partition that read the same watermark cannot claim it: it
// discards its file and returns [sinks.ErrFenced]. This closes the window
// between the fence (the look at the committed files just before) and the
// publish. Then the dead-letter file, if any, and the data file are
// published, each only if its name is free: link(2) then removal of the
// temporary name and fsync of the folder (and of new parent folders)
// locally, CommitBlockList with If-None-Match: * on Blob. The claim names
// the files and where their prepared bytes are, so it decides the commit:
// a writer that dies after claiming has its commit published by the next
// Open of the partition, or dropped when the bytes are gone. Close without
// Flush discards the open file. Once a commit is published, the previous
// commit's claim is removed (Open removes any older ones a crash left), so
// one claim per partition remains; since a removed name can be claimed
// again, a writer looks at the committed files once more after creating
// its claim (claim.go).
//
// Open finds the partition's watermark in the names of its committed files
// (the highest last sequence number) and reads the last offset from that
// file's key-value metadata, which also holds the eventhub, partition and
// sequence range. It first finishes claimed commits, then removes the
// temporary and spool files earlier writers of the partition left behind.
//
// # Routes
//
// With `routes:`, each event takes the first route whose `when` condition
// (package expr) holds, a route without `when` taking the rest; each route
// has its own path template and columns. A route's path may hold values of
// the event, `type={$.type}/{partition}-{first_seq:020}-{last_seq:020}.parquet`;
// a value must be letters, digits and - _ . = (not starting with _ or .),
// at most 128 bytes, else the event is a dead letter, as is an event no
// route takes. The sink's own path then only says where the dead letters
// go.
//
// A commit has one data file per route and value of its path that took
// rows (at most max_open_files, 16 by default, before the commit rolls),
// and every file of a commit is named with the commit's whole sequence
// range, so a range is published once per route and a replay renders the
// same names. The claim names every file of the commit; the dead letters
// are published first, then the data files in name order. The watermark
// is the highest range of any route's data file or of a dead-letter file
// (a commit of dead letters only has no data file); since any file of a
// commit shows its range, Open publishes again every file of the claim of
// the newest range (a no-op when they are all visible) besides the claims
// past it, so a writer killed between two files of a commit has the commit
// finished, never half visible after Open. A test kills a child process
// before each of the 82 steps of two routed commits and reads every
// route's files back.
//
// # Schema
//
// Columns come from the shared mapping language ([mapping.Columns]), in
// mapping order: string, int32, int64, double, boolean, timestamp (UTC,
// microseconds, or milliseconds with timestamp(ms)), decimal(p,s) up to 38
// digits, json (kept as a UTF-8 string), uuid and bytes; nullable columns
// are optional. Every column but booleans is dictionary-encoded (falling
// back to plain pages once a column's dictionary holds 64 KiB in a row
// group), statistics are
// written (but no min/max for decimals over 18 digits, which parquet-go
// v0.32.0 orders wrongly), compression is zstd, snappy or none. Every file
// is written by a new Parquet writer: parquet-go v0.32.0's Reset drops
// path_in_schema from the files written after it. The footer's created_by
// names the build (internal/buildinfo). Row groups are written to
// the temporary file as they reach row_group_size, so memory is about
// row_group_size per open file (one per partition without routes), plus
// each column's dictionary (at most 64 KiB and its hash table; past it
// the column's pages are plain) and 1 MiB of zstd window per page being
// compressed (BenchmarkPeakHeap: 4 partitions, 4 MiB row groups, files of
// 250,000 rows: about 66 MiB of live heap at its peak).
//
// # Dead letters
//
// Events that do not fit the schema are returned by Write in a
// [*sinks.BatchError]. The writer implements [sinks.DeadLetterer]: dead
// letters are JSON lines (the event, its metadata and the reason) in a
// _dead_letters folder next to the data, in a file named like the data
// file, committed by the same Flush just before the data file. Open
// removes a dead-letter file whose data file never became visible, since
// the replay writes it again. A commit with only dead letters still writes
// a data file, without rows, so that its range is recorded.
package parquet
