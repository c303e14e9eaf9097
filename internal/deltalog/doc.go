// Package deltalog reads and writes a Delta Lake transaction log, limited
// to what an append-only writer needs: protocol 1/2, metaData, add (and
// remove, read back), txn and commitInfo actions in JSON commit files,
// classic single-file Parquet checkpoints and _last_checkpoint. The
// reference is delta-io/delta's PROTOCOL.md; each rule this package
// relies on is named where the code applies it.
//
// It is a codec and a replay: [Action] holds the protocol's actions with
// their JSON names, [Encode] and [Parse] turn a commit into bytes and
// back, [Snapshot] folds commits and checkpoints into a table's state. The
// files live behind [Store] (list, read, create-if-absent, put, remove),
// with a local-directory and an Azure Blob implementation. [Log] ties
// them: it loads a snapshot, brings it up to date, and commits a version
// only if no one else did ([ErrVersionExists]).
//
// No maintained Go library writes the Delta log (see docs/internals.md),
// hence this package.
package deltalog
