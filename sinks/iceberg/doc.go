// Package iceberg is the ehsink sink that appends events to an Apache
// Iceberg table, with exactly-once snapshot commits. Importing it registers
// the sink type "iceberg". It is built on github.com/apache/iceberg-go:
// the catalog (sql on SQLite or PostgreSQL, or rest), the data files
// (Parquet with the table's field IDs and statistics), the manifests, the
// snapshots and the maintenance are iceberg-go's.
//
// # Commits
//
// Each partition gathers its rows in memory (about max_bytes per
// partition) until the runner asks [sinks.Batcher] FlushDue and it says
// max_rows, max_bytes or max_age is reached. Flush writes the rows to data
// files and appends them in one snapshot whose summary carries the
// partition's watermark under
//
//	ehsink.<connector>.<eventhub>.<consumergroup>.p<partition> = <seq>,<offset>
//
// The data and the watermark become visible in one catalog swap, so there
// is no instant where one is committed without the other. Each commit
// carries the other partitions' keys forward from its parent snapshot, so
// the current snapshot holds every partition's watermark (a snapshot made
// by another engine that drops them is walked past to its ancestors). Open
// reads the partition's watermark from there: the sink is authoritative on
// resume.
//
// A commit asserts the table's current snapshot. When another writer
// committed first, the sink reloads the table and looks at the partition's
// watermark in the new metadata: if it moved since this writer read it,
// another owner of the partition committed and this one is stale: it
// removes its data files and returns [sinks.ErrFenced]. Otherwise the
// commit is made again on the new metadata, with the same data files.
// Writers of one sink commit to a table one at a time: a commit waiting
// for its turn is queued, and the writer whose turn it is makes every
// queued commit in one snapshot carrying each one's watermark (a stale
// owner's among them is fenced alone), so partitions whose flushes come
// together cost the catalog one commit.
//
// With routes, each event goes to the table of the first route whose
// condition holds (a templated table, such as events_{$.type}, is loaded
// or created when an event first names it, at most max_tables per route),
// and a flush commits one snapshot per table that took
// rows, one after the other (a catalog has no commit across tables). No
// table's watermark then speaks for the others, so Open reports none and
// the partition resumes from its checkpoint, which the runner writes only
// once Flush returned; each table skips the events its own watermark
// covers ([sinks.Trimmer] counts them).
//
// Data files are named with a write UUID whose first bytes come from the
// partition's key. A failed commit removes its files (unless its outcome is
// unknown); Open removes the partition's unreferenced files older than
// maintenance.orphan_age, left by a process that died mid-commit.
//
// # Evolution
//
// With evolve (the default), a mapped column an existing table lacks is
// added when the sink opens the table: an optional field with a new field
// ID, through iceberg-go's schema update, which asserts the schema it was
// built on; a lost race is made again on the fresh metadata, which another
// replica may already have widened. A field is never dropped or retyped.
//
// # Dead letters
//
// The writer is a [sinks.DeadLetterer]: the letters of a flush go to the
// table dead_letter_table of the namespace, committed before the data with
// the partition's watermark in that table. A flush replayed after a
// failure between the two commits skips the letters that watermark
// covers, and a stale owner is fenced by it, so each letter is stored
// once. The sink is also the store `ehsink deadletters` reads and replays
// (replay.go): a replayed letter is marked in a property of the table its
// rows went to, set in the commit that appends them.
//
// # Outages
//
// A catalog or warehouse that cannot be reached makes New, Open and Flush
// fail with errors marked [sinks.Transient], which the runner waits out;
// a refusal that retrying cannot change (a login, a missing database, a
// REST catalog's 400, 401 or 403, its token endpoint refusing the
// credential) is returned unmarked.
//
// # Maintenance
//
// Every maintenance.every, after a commit, the sink compacts small data
// files when maintenance.compact is set (iceberg-go's planner and rewrite;
// the rewrite's snapshot carries every watermark and asserts the snapshot
// it read), expires snapshots (keeping keep_snapshots and those younger
// than max_snapshot_age) and removes orphan files older than orphan_age;
// a table it creates keeps keep_metadata_files previous metadata files.
package iceberg
