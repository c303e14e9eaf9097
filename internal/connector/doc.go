// Package connector holds the connector spec (the YAML types of
// connectors.yaml, their defaults and validation) and the runner that moves
// each owned partition through source -> watermark (dedupe.After) -> filter ->
// sink -> checkpoint.
//
// # Filters
//
// A connector's `filter:` ([FilterSpec]) drops events before the sink by
// conditions of package expr. A dropped event is not a dead letter: it moves
// the committed watermark, and so the checkpoint, once every event written
// before it is committed (at once when the writer holds nothing unflushed,
// else at the end of the flush that commits what it holds), and is counted
// in ehsink_events_filtered_total. An event a condition cannot read (a body
// that is not JSON) is a dead letter.
//
// # Loading
//
// [Load] reads connectors.yaml in four steps, and reports every problem of
// all of them at once, each with its path (`connectors[1].sink.table:
// required`):
//
//  1. the YAML file (koanf), then the EHSINK_ environment overrides below;
//  2. ${VAR} and ${VAR:-default} expansion in every string value ($$ is a
//     literal $; a lone $, as in $Default or $.order_id, stays as it is);
//  3. strict decoding (package config): unknown keys are errors with a
//     suggestion; each connector's `sink:` block is decoded into the config
//     of the driver its `type` names in the sink registry, then checked by
//     the config's own Validate;
//  4. defaults (the values written on the fields of the spec types, applied
//     in one place), then [Config.Validate].
//
// A ${VAR} needs no quotes, even in YAML flow style where braces are syntax
// (`blob: {connection: ${STORAGE_CONNECTION}, container: checkpoints}`):
// the loader sets references aside while it parses the YAML.
//
// # Environment overrides
//
// A variable EHSINK_<SEG>__<SEG>__... sets one value of the file, before
// ${VAR} expansion. Segments are separated by a double underscore; a single
// underscore stays part of a key (MAX_EVENTS is max_events). Keys are matched
// without regard to case, with - and . in existing keys read as _. In a list
// (connectors), a segment is an index (0, 1, ...; the next free index adds an
// item) or the name of the item, so
//
//	EHSINK_CONNECTORS__ORDERS_TO_POSTGRES__SINK__TABLE=orders_v2
//	EHSINK_CONNECTORS__0__SOURCE__BATCH__MAX_EVENTS=100
//	EHSINK_CONNECTORS__0__SOURCE__CONNECTION='${EVENTHUB_CONNECTION}'
//	EHSINK_DRAIN_TIMEOUT=10s
//	EHSINK_EMULATOR__HUBS__ORDERS=8
//
// set the table of the connector named orders-to-postgres, the batch size of
// the first connector, its connection string (from another variable), the
// drain timeout, and the partition count of the emulator's orders hub. A
// value is a string, decoded like one written in the file (numbers,
// booleans, durations and sizes parse from strings), unless it starts with
// [ or {: then it is a YAML flow list or map (`[order_id, customer]`). New
// map keys are written in lower case. Only variables whose first segment is
// a top-level key (CONNECTORS, EMULATOR, DRAIN_TIMEOUT) are read, so other
// EHSINK_ variables (EHSINK_TEST_POSTGRES_DSN) are left alone; below that,
// a misspelled key is reported like one in the file.
package connector
