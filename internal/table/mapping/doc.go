// Package mapping is the column-mapping language shared by the table-shaped
// sinks (PostgreSQL, Parquet): it says which value of an event goes into
// which column, with which logical type, and turns events into rows of typed
// Go values.
//
// # Columns
//
// A column has a name, a source, a [Type] and a nullability. Sources are
//
//   - a JSON path into the body: `$.order.id`, `$.items[0].sku`,
//     `$['key with spaces']`; `$` alone is the whole body;
//   - event metadata: `@partition`, `@sequence_number`, `@offset`,
//     `@enqueued_time`, `@partition_key`, `@content_type`,
//     `@properties.NAME` (an application property) and `@body` (the whole
//     body).
//
// In YAML a mapping is written in one of three forms:
//
//	columns: {order_id: $.order_id, seq: "@sequence_number"}        # short
//	columns: {amount: {from: $.amount, type: numeric(12,2)}}         # long
//	columns: [{name: order_id, from: $.order_id, type: bigint}]      # list
//
// The map forms order the columns by name (YAML maps carry no order once
// loaded); the list form keeps the order as written.
//
// # Types and defaults
//
// A column without a type takes the natural type of its source: int64 for
// @sequence_number, timestamp for @enqueued_time, json for @body and `$`,
// string for every other metadata field, and string for JSON paths. A JSON
// path has no type that could be inferred before seeing data, and a column
// must have one type for every event (and for the DDL derived from it), so
// a JSON path is a string unless the mapping says otherwise: numbers and
// booleans become their JSON text, objects and arrays their raw JSON.
//
// A column without `nullable` is nullable, except the metadata that every
// event has (@partition, @sequence_number, @offset, @enqueued_time, @body).
// A missing or null value of a non-nullable column is an error of that
// event.
//
// # Go values
//
// [Mapper.Map] produces, per logical type: string, int32, int64, float64,
// [Decimal], bool, time.Time (UTC, truncated to the type's unit), json.RawMessage
// (the raw JSON text of the value), [16]byte (uuid) and []byte; nil is NULL.
// Values never alias the event: the sink may keep them after the runner
// reuses the event's memory.
//
// Conversions are strict and per event: "abc" into an integer, a fraction
// into an integer, an invalid UUID or an invalid JSON body is a
// [*ColumnError] (or [ErrInvalidJSON]) for that event only.
package mapping
