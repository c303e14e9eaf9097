// Package cdc decides, per event, what a keyed sink does with it: write
// (upsert) the row the column mapping makes of it, delete the row of its
// key, or skip it. It holds the two ways a connector says so:
//
//   - a delete condition over plain JSON events (the sink's `delete:`
//     block): an expression of package expr, such as "$.op == 'd'", and
//     the sources of the key columns in a delete event;
//   - the Debezium preset (`format: debezium`): the body is a Debezium
//     change event, in the JSON converter's form with its schema
//     ({"schema": ..., "payload": {...}}) or without it. Ops c, u and r
//     write the after image (the column mapping's paths read it); op d
//     deletes the key read from the before image, or from the record key
//     when there is none (Debezium Server sends the record key as the
//     Event Hubs partition key); an empty or null body (a tombstone) is
//     skipped; op t (truncate) and any other op are errors of the event.
//
// With the schema, values whose logical type the mapping cannot read as
// encoded are rewritten first: timestamps (Timestamp, MicroTimestamp,
// NanoTimestamp, Connect Timestamp) become RFC 3339 text in UTC; dates
// (Date, Connect Date) midnight UTC of the day; times of day (Time,
// MicroTime, NanoTime, Connect Time) "15:04:05.999999"; decimals
// (Connect Decimal, VariableScaleDecimal) their decimal text; JSON held in
// a string (io.debezium.data.Json) the JSON itself. Without the schema,
// values stay as Debezium wrote them: numbers are read as the column's
// type says (a timestamp column reads a number as Unix milliseconds), and
// precise decimals arrive as base64 that only the schema can decode (use
// decimal.handling.mode=string or double).
//
// The package reads no service: `ehsink test` runs the same rules as the
// PostgreSQL sink. [Rules] are safe for concurrent use.
package cdc
