// Package config is the configuration vocabulary of ehsink: a strict,
// reflective decoder from the generic trees that koanf loads from YAML
// (maps, lists and scalars) into Go structs, the types and errors that go
// with it, and the ${VAR} expansion applied to values before decoding.
//
// Every part of ehsink that reads configuration uses it: the connector
// loader for connectors.yaml, and every sink, built-in or custom, for its
// `sink:` block.
//
// # Decoding
//
// [Decode] fills a struct by its `yaml` field tags. A field without a tag is
// matched by its lower-cased Go name; a tag of "-" skips the field; an
// embedded struct without a tag, or any struct field tagged `yaml:",inline"`,
// has its fields read from the same map. Supported field types:
//
//   - strings and named string types (including [secret.String]); integer,
//     float and boolean YAML scalars are accepted and formatted;
//   - bool, all integer kinds and floats; a string value is parsed, so
//     `max_events: ${MAX_EVENTS}` works; overflow and fractions are errors;
//   - [time.Duration], written with a unit ("500ms", "1m", "1h30m"); a bare
//     number is rejected, since "is 500 milliseconds or seconds?" has no
//     safe answer;
//   - [ByteSize], such as "64MiB", "10MB" or 1024 (see [ParseByteSize]);
//   - maps (string or integer keys), slices and arrays;
//   - pointers, allocated when the key is present, even with an empty
//     value, so that `demo:` alone turns a section on with its defaults;
//   - any type whose pointer implements [Unmarshaler] (custom shapes), or
//     else [encoding.TextUnmarshaler] for scalar values;
//   - fields of interface type receive the raw value as is.
//
// Fields missing from the input keep the value they had, so a config
// struct made with its defaults set keeps them.
//
// Decoding is strict and complete: a key that names no field is an error
// with a suggestion (`max_evnts: unknown key (did you mean max_events?)`),
// and Decode does not stop at the first problem. It returns every problem
// as a [*Error] (a path such as `source.batch.max_evnts` or
// `columns[2].type`, and the error), joined with [errors.Join]. [Prefix]
// puts a path in front of every such error (`connectors[1].sink` + ...), and
// [Errors] lists them.
//
// # Expansion
//
// [Expand] replaces ${VAR} and ${VAR:-default} in every string value of a
// tree, and $$ by a single $. A $ not followed by { or $ is kept as is, so
// values such as `$Default` and `$.order_id` need no escaping. A variable
// that is unset (or empty) and has no default is an error naming the
// variable and the path of the value. Map keys are not expanded.
//
// # Printing
//
// [Marshal] writes a struct back as YAML by the same tags, with durations and
// sizes in their written forms, nil pointers left out, and secrets as ***
// (through their MarshalText method).
package config
