// Package delta is the ehsink sink that appends events to a Delta Lake
// table, in a local directory or an Azure Blob (ADLS Gen2) container,
// exactly once across restarts, replicas and crashes. Importing it
// registers the sink type "delta". The Delta log is written by
// internal/deltalog (protocol reader 1 / writer 2, no table features: what
// Fabric, Databricks, Synapse serverless, Azure Data Explorer and DuckDB
// read); the data files are Parquet, written as the parquet sink writes
// them (internal/parquetfile), with statistics in their add actions.
//
// # Commits
//
// Each partition gathers its rows in Parquet data files in memory (one
// per set of partition_by values, about max_bytes per partition) until
// the runner asks [sinks.Batcher] FlushDue and it says max_rows,
// max_bytes or max_age is reached. Flush stores the files under fresh
// names (invisible: readers read only what the log adds), then creates
// the next commit file _delta_log/<version>.json only if it does not
// exist (link(2) of a fsynced temporary file locally, If-None-Match: * on
// Blob, which Azure refuses with 412 and Azurite with 409). The commit
// holds the add actions, a txn action for the partition
//
//	appId = ehsink/<connector>/<namespace>/<eventhub>/<consumergroup>/<partition>
//	version = the sequence number of the last event committed
//
// with a second txn, appId ehsink-offset/<the same>, whose version is
// that event's offset (-1 if not a number: a checkpoint needs it too),
// and commitInfo. The data and the watermark become visible in one file.
// Open reads the partition's txn from the log (the sink is authoritative
// on resume). When another writer created the version first, the sink
// reads the winner's commits: if the partition's txn moved past what this
// writer last saw, another owner committed the partition and this one is
// stale: it removes its files and returns [sinks.ErrFenced]. Otherwise it
// commits at the next version with the same files. The sink's writers
// take turns: a commit waiting for its turn is queued, and the writer
// whose turn it is makes every queued commit in one version.
//
// Before each commit the table's protocol is checked again: a table
// another engine upgraded to features this writer does not know is not
// written. Every checkpoint_interval versions (10) the committing writer
// writes a classic checkpoint (<version>.checkpoint.parquet) and
// _last_checkpoint, so that readers do not replay the whole log, and
// removes the log entries the checkpoint covers once they are older than
// the table's delta.logRetentionDuration (30 days unless set).
//
// Data files are named part-<tag>-<uuid>, the tag a hash of the
// connector's stream. When the sink starts, it removes the files of its
// tag that no version adds and no tombstone keeps, older than orphan_age:
// those of a flush killed before its commit.
//
// # Existing tables
//
// A table made by another engine is appended to when the columns fit its
// schema (same names and Delta types, nullable where the table says so;
// the table's other columns nullable) and its partition columns are
// partition_by; otherwise New fails with an error naming the column. A
// table with delta.setTransactionRetentionDuration is refused: the txn
// of an idle partition would expire and its events be written twice.
//
// With evolve (on where create_table is), mapped columns the table lacks
// are added when the sink starts: a version of their own whose metaData
// is the schema with them, nullable, committed before any row that carries
// them, and only to a table that then fits. A writer of the older mapping
// goes on appending to the widened table. Nothing is dropped or retyped.
//
// # Dead letters
//
// The writer is a [sinks.DeadLetterer]: the letters of a flush go to the
// Delta table dead_letter_table (the table's folder + "_dead_letters"
// unless set), committed before the data with the partition's txn in that
// table. A flush replayed after a failure between the two commits skips
// the letters that txn covers, and a stale owner is fenced by either
// table, so each letter is stored once.
//
// The sink is the store `ehsink deadletters` reads and replays
// (letters.go): a replayed letter's rows are committed with a txn action
// of its own that marks it, in the same table version.
//
// # Routes
//
// With routes, each event goes to the table of the first route whose
// condition holds (internal/table/routing); each route's table is a sink
// of this package with its own log and txns, and one dead-letter table
// serves them all. A flush commits the letters, then every table in the
// routes' order, each with the partition's txn at the flush's last
// sequence number, so Open returns the lowest txn (routed.go says why
// that is safe, and when it returns none).
package delta
