// Package postgres is the PostgreSQL sink: it writes the events of each
// partition into one table, through the COPY protocol, with
// effectively-once output. Importing it registers the sink as "postgres".
//
// # Configuration
//
//	sink:
//	  type: postgres
//	  dsn: ${PG_DSN}              # URL or keyword form; sslmode is honoured
//	  table: sales.orders         # optionally schema-qualified
//	  mode: upsert                # append (default) or upsert
//	  key: [order_id]             # upsert only: the conflict target
//	  columns: {order_id: {from: $.order_id, type: bigint}, amount: {from: $.amount, type: numeric(12,2)}}
//	  create_table: false         # derive CREATE TABLE from the mapping
//	  evolve: false               # add mapped columns the table lacks (default: create_table)
//	  pool_size: 4
//	  format: json                # or debezium: Debezium change events (package cdc)
//	  delete: {when: "$.op == 'd'", key: {order_id: $.id}}   # upsert only
//	  tombstone_retention: 168h   # how long a delete's tombstone guards its key
//
// The column mapping is package mapping's language, shared with the Parquet
// sink. Mapping types become PostgreSQL types as string→text, int32→integer,
// int64→bigint, double→double precision, decimal(p,s)→numeric(p,s),
// boolean→boolean, timestamp→timestamptz, json→jsonb, uuid→uuid,
// bytes→bytea.
//
// # Evolution
//
// With evolve (on where create_table is), a mapped column an existing table
// lacks is added at start, nullable, with the type create_table would give
// it, in the transaction that checks the table and under the advisory lock
// the sink's DDL takes, so replicas starting together both succeed. A
// column is never dropped or its type changed: a column of another type
// is an error that names it and the ALTER TABLE a user can run.
//
// # Deletes
//
// With a `delete:` condition, or `format: debezium` (op d), an event
// deletes the row of its key instead of writing one. A delete obeys the
// ordering guard of an upsert and leaves a tombstone (in
// ehsink_tombstones_<table>) so that a replayed older update does not
// bring the row back; tombstones are deleted after tombstone_retention.
// deletes.go has the details and the cost. `ehsink validate --print`
// shows the DDL of every table the sink creates ([sinkConfig.DDL]).
//
// # Routes
//
// With `routes:`, one connector writes several tables. Each event takes the
// first route whose `when` condition (package expr) holds; a route without
// `when` takes the rest. Each route has its table, columns and, for
// upserts, key; the mode and create_table are the connector's:
//
//	routes:
//	  - {name: created, when: "$.type == 'order_created'", table: orders, key: [order_id], columns: {...}}
//	  - {name: cancelled, when: "$.type == 'order_cancelled'", table: cancellations, key: [order_id], columns: {...}}
//	  - {table: "events_{$.type}", key: [id], columns: {...}, max_tables: 20}
//
// A table may be a template of event values (`events_{$.type}`); the
// rendered name must be one or two identifiers (letters, digits, _; 63
// bytes each), and its table must exist or create_table be set. An event
// that no route takes, that renders a name that is not an identifier,
// names a table that does not exist or does not fit the columns, or would
// be past the route's max_tables (100 by default) is a dead letter with
// that reason. A flush writes all the tables of its rows, its dead letters
// and the partition's one watermark row (table_name "*") in one
// transaction, so the fence below covers every table; the state tables
// live in the connection's search_path schema.
//
// # One transaction per flush
//
// Write maps events to rows and buffers them; Flush commits them in one
// transaction that also moves the partition's row in ehsink_watermarks
// (connector, namespace, event hub, consumer group, table, partition →
// sequence number, offset, updated_at) and stores the dead letters given to
// DeadLetter in ehsink_dead_letters. Both tables live in the target
// table's schema and are created if missing. Open reads the watermark, so
// the runner drops events the table already holds: a replay writes nothing
// twice.
//
// `ehsink deadletters replay` writes a dead letter's event through a writer
// of the sink whose transaction marks the letter (replayed_at) where a
// flush moves the watermark: the watermark stays the partition owner's,
// and a letter is written once however often the replay runs
// (deadletters.go).
//
// The watermark update is the transaction's first statement and is
// conditional on the value the writer last read (fencing): when two owners
// of a partition overlap, the second one's update waits for the first one's
// row lock and then matches no row; it rolls back, re-reads the watermark,
// drops the buffered events that are now covered and commits the rest. No
// duplicate, no gap, and a stale owner never moves the watermark back.
//
// In append mode rows are copied straight into the table. In upsert mode
// they are first collapsed to the newest event per key (PostgreSQL refuses
// to update one row twice in a statement) and merged with one statement,
// INSERT ... SELECT FROM unnest(one array per column) ON CONFLICT (key) DO
// UPDATE, sent with COMMIT in one round trip (no staging table, so no
// session state: it works behind a transaction-pooling proxy), guarded by
// two hidden columns that the table must have in upsert mode:
//
//	_ehsink_partition text, _ehsink_seq bigint
//
// A row is only overwritten by an event of another partition or by a
// later event of the same partition, so replaying an older range changes
// nothing. (Sequence numbers of different partitions are not comparable: a
// key that moves between partitions takes the last write.)
//
// # Errors
//
// A value that does not convert is an error of its event, reported by Write
// in a [*sinks.BatchError]; the runner dead-letters it or stops.
//
// A row the server refuses is an error of its event too. SQLSTATEs fall in
// three groups:
//
//   - refused row (poison): class 22 (data exception: out of range, too
//     long, invalid for its type), class 23 (integrity constraint
//     violation: NOT NULL, foreign key, unique, CHECK, exclusion, also when
//     deferred to COMMIT) and 54000 (an index row or a row too big), but
//     not 22P04 (bad COPY format: the sink's own encoding). Flush finds the
//     refused rows by bisecting the batch under savepoints in a probe
//     transaction that it rolls back, commits nothing, and returns a
//     [*sinks.RejectedError] naming their events with the server's message,
//     constraint and detail. The runner dead-letters them (or stops under
//     errors.tolerance none) and flushes again: the other rows, the dead
//     letters and a watermark that covers them commit in one transaction,
//     so a replay writes nothing twice and the partition moves on in order.
//     In upsert mode a refused newest event of a key gives way to the key's
//     previous event of the same flush. A foreign key whose parent row
//     arrives later is refused the same way: the event waits in the dead
//     letters. Memory stays the flush's rows.
//   - transient: class 08 (connection), 40001 and 40P01 (serialization,
//     deadlock), 55P03 (lock not available), 57P01-57P03 and 57014
//     (shutdown, starting, cancelled), 53100, 53200, 53300 and 53400 (disk
//     full, out of memory, too many connections), and connection errors
//     without a SQLSTATE. They are returned marked with [sinks.Transient],
//     and a failed Flush keeps its rows for the retry. A commit whose
//     outcome is unknown (the connection dropped during COMMIT) is safe to
//     retry: if it did commit, the retry finds the watermark moved and has
//     nothing left to write.
//   - permanent: everything else, such as missing tables (with
//     create_table false), missing columns, incompatible column types, a
//     key without a unique index, permission errors (class 42), and a
//     refusal that no single row explains.
//
// Identifiers from the configuration are always quoted; no SQL text is ever
// built from event content. The DSN's password never appears in logs or
// errors.
package postgres
