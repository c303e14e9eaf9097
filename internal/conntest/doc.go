// Package conntest runs the unit tests of a connectors.yaml: a test file
// lists, per connector, input events and the rows, records or dead letters
// the connector must make of them. The events go through the sink's own
// table shape (package sinks/table: the routes, columns, key, explode and
// deletes its config declares, and the function that renders and checks
// an event's table or path, the one the running sink calls) and, for the
// stdout sink, through the line its writer prints (its config's Line); no
// Event Hubs, database or storage is involved. No sink package is
// imported: a binary tests the sinks it registers, and a sink opts in
// through its config (a TableShape method).
//
// A test file:
//
//	tests:
//	  - name: an order becomes a row
//	    connector: orders-to-parquet
//	    events:
//	      - body: {order_id: o-1, amount: 12.5, customer: {id: c-7}}
//	        key: c-7                      # the partition key
//	        properties: {source: web}     # application properties
//	        partition: "2"                # if empty, "0"
//	        sequence_number: 41           # if absent, the event's index in the case
//	        enqueued_time: 2026-03-01T10:00:00Z   # if empty, 2026-01-01T00:00:00Z
//	    expect:
//	      - row: {order_id: o-1, amount: 12.5, customer: c-7, seq: 41}
//	  - name: a bad amount is a dead letter
//	    connector: orders-to-parquet
//	    events: [{body: {order_id: o-2, amount: lots}}]
//	    expect: [{dead_letter: 'column "amount"'}]
//
// A body that is a YAML string is sent as is (write JSON text in a string to
// keep the exact text of its numbers); any other body is encoded as JSON.
// Each event has one expectation, in order:
//
//   - row: column → value, for sinks with a table shape (postgres,
//     parquet, stdout with columns, custom sinks whose config has a
//     TableShape method with columns; the
//     columns its `key` list names are not nullable, as the PostgreSQL
//     sink's upsert key).
//     Values are compared after the column's type conversion: numbers by
//     value, timestamps as instants, json columns as JSON. Columns not
//     listed are not checked; null expects NULL.
//   - route, table: for a connector with routes, the route the event takes
//     (its `name`, or its table or path as written) and, for postgres, the
//     table it lands in (a templated table as rendered); with or without a
//     row, whose columns are then those of that route.
//   - record: for the stdout sink without columns, the envelope fields to
//     check (json format), or the whole line (raw format).
//   - dead_letter: a substring of the reason the event is dead-lettered
//     with.
//   - delete: key column → value, for an event that deletes its key (a
//     postgres sink with `format: debezium` or a `delete:` block; the
//     sink's rules of package cdc decide, as in the writer).
//   - skipped: true, for an event that writes nothing and is no dead
//     letter (a Debezium tombstone).
//   - filtered: true, for an event the connector's `filter:` drops (the
//     filter runs first, as in the runner; a body it cannot read is a dead
//     letter).
//
// A sink that compiles its routes for the table shape (the postgres sink)
// gives its own mapper, delete rules, row check and destination render,
// the ones its writer runs, so what a case sees is what the writer does;
// a render keeps the writer's state across events (the tables a templated
// route named, against max_tables and the other routes' tables). Checks
// made at the destination (whether a routed table exists, PostgreSQL's
// column lengths and constraints, a sink's commit) are not made.
package conntest
