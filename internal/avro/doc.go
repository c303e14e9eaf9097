// Package avro turns Avro binary bodies into the JSON the column mapping
// reads, and JSON values into Avro bodies (for `ehsink send --avro` and
// `ehsink test`). Schemas are parsed and checked by
// github.com/hamba/avro/v2, whose Reader and Writer read and write the
// binary encoding.
//
// A [Program] is compiled once per writer schema (and reader schema, when
// the connector configures one) and then turns each body into JSON without
// building an intermediate value: the mapping, the filters, the routes and
// the deletes then read the event as they read a JSON event. Writer and
// reader schemas are resolved as the Avro specification says: fields by
// name (or a reader field's alias), fields only the writer has are
// skipped, fields only the reader has take their default, numbers are
// promoted, enum symbols the reader lacks take its default.
//
// # Rendering
//
// Values render as the mapping's typed columns parse them:
//
//   - union: the value of the branch written, unwrapped (a nullable
//     field is its value or null);
//   - timestamp-millis, timestamp-micros (and their local- forms, read as
//     UTC): an RFC 3339 string ("2024-05-01T12:00:00.123Z");
//   - date: the day's midnight UTC as an RFC 3339 string, so that a
//     timestamp column takes it;
//   - time-millis, time-micros: "15:04:05.000" (".000000");
//   - decimal: a JSON number with exactly its scale's digits ("12.30");
//   - uuid: its string (a fixed(16) uuid is formatted 8-4-4-4-12);
//   - bytes and fixed: base64 strings, as a bytes column reads them;
//   - float and double: JSON numbers, and "NaN", "Infinity", "-Infinity"
//     as strings.
//
// A Program is safe for concurrent use.
package avro
