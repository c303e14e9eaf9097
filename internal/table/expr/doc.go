// Package expr is the condition language of connectors.yaml (filters,
// routes, delete conditions) and its templates (`orders_{$.type}`).
// A condition is compiled once, when the configuration is validated, and
// evaluated per event without allocating.
//
// # Grammar
//
//	condition  = and { "or" and }
//	and        = unary { "and" unary }
//	unary      = "not" unary | primary
//	primary    = "(" condition ")" | "exists" "(" operand ")" | "true" | "false" | comparison
//	comparison = operand ( cmp operand
//	                     | [ "not" ] "in" "[" literal { "," literal } "]"
//	                     | "=~" string )
//	cmp        = "==" | "!=" | "<" | "<=" | ">" | ">="
//	operand    = path | metadata | literal
//	literal    = string | number | "true" | "false" | "null"
//
// Paths are those of a column mapping: `$.type`, `$.items[0].sku`,
// `$['key with spaces']`, `$` (the whole body). Metadata are `@partition`,
// `@sequence_number`, `@offset`, `@enqueued_time`, `@partition_key`,
// `@content_type`, `@properties.NAME` and `@body`. Strings are written in
// single or double quotes; a backslash escapes the quote and the backslash
// and is kept as written before any other character ('^\d+$' is the regular
// expression ^\d+$). Numbers are written as in JSON. Keywords are lower
// case. `not` binds tighter than `and`, which binds tighter than `or`.
//
// # Values and comparisons
//
// An operand's value is missing (a path not in the body, an absent
// property), null, a boolean, a number, a string, a timestamp, or an object
// or array. Metadata have fixed kinds: @partition, @offset and @body are
// strings, @sequence_number a number, @enqueued_time a timestamp,
// @partition_key and @content_type strings or null; a property takes the
// kind of its AMQP type (strings and binary are strings, integers and
// floats numbers, timestamps timestamps).
//
//   - == is true when both sides have the same kind and value. Numbers
//     compare by value (1 == 1.0; integers exactly, up to 64 bits); strings
//     byte by byte; a timestamp and a string compare when the string is an
//     RFC 3339 timestamp. Values of different kinds are never equal: the
//     number 7 is not the string '7'. null equals only null.
//   - != is exactly `not ==`: `$.type != 'heartbeat'` is true for an event
//     without a type.
//   - <, <=, >, >= order numbers, strings and timestamps; between anything
//     else (a missing value, null, booleans, mixed kinds) they are false.
//   - `x in [a, b]` is `x == a or x == b`.
//   - `x =~ 're'` is true when x is a string that the RE2 regular expression
//     re matches (anywhere; anchor it with ^ and $).
//   - exists(x) is true when the path is in the body (even with a null
//     value), or the property, partition key or content type is set.
//   - A missing value equals nothing, so every comparison with it is false
//     (and != true). Objects and arrays equal nothing.
//
// # Errors at validation
//
// Compile reports a [*SyntaxError] with the column for: a syntax error; an
// unknown metadata name; an invalid path; a comparison whose result is
// known without an event (two literals; `@sequence_number == 'x'`, a
// string metadata compared with a number, @enqueued_time with a string that
// is not an RFC 3339 timestamp, `@partition == null`); ordering with null
// or a boolean; an invalid regular expression; exists() of something that
// always exists. A string literal compared with @enqueued_time is read as a
// timestamp at compile time.
//
// # Evaluation
//
// The body is parsed only when the evaluation reaches a JSON path, at most
// once per event, with the mapping's strict JSON scanner. Conditions that
// read only metadata never parse the body.
//
// A path into a body that is not valid JSON (an empty tombstone, plain
// text) has an unknown value, and so has every comparison, in, =~ and
// exists() that reads it. Conditions then follow three-valued logic:
// `unknown or true` is true, `unknown and false` is false, and otherwise
// and, or and not of an unknown are unknown. So `$.op == 'd' or @body ==
// ""` is true on an empty body, in either order. A condition whose final
// value is unknown is an error of the event (an [*UnknownError] wrapping
// [mapping.ErrInvalidJSON]), never a silent false: the caller dead-letters
// it with the reason.
package expr
