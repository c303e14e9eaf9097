// Package amqp is a pure AMQP 1.0 codec for the ehsink Event Hubs emulator:
// the type system (primitive, compound and described values), frame headers
// and the performatives of the transport, session, link and SASL layers.
//
// It does no I/O. Every decoder takes a byte slice and returns an error for
// malformed input instead of panicking; decoders are fuzzed. Encoders append
// to a caller-supplied slice (pgproto3 style) so the connection engine can
// reuse buffers.
//
// Decoded values use these Go types: nil (null), bool, uint8, uint16, uint32,
// uint64, int8, int16, int32, int64, float32, float64, Char, time.Time
// (timestamp, millisecond precision, UTC), UUID, []byte (binary), string,
// Symbol, List, Map, Array, Described and Decimal (decimal32/64/128 kept raw).
//
// All types in this package are plain values and are safe for concurrent
// use as long as callers do not mutate shared values.
package amqp
