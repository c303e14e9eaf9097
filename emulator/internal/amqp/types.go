package amqp

import (
	"fmt"
	"time"
)

// Symbol is an AMQP symbol: an ASCII string from a constrained domain,
// encoded differently from string (sym8/sym32).
type Symbol string

// UUID is an AMQP uuid (RFC 4122 bytes).
type UUID [16]byte

// Char is an AMQP char: a single UTF-32BE code point.
type Char rune

// Decimal keeps an IEEE 754 decimal32/64/128 value as raw big-endian bytes;
// the emulator never interprets decimals, it only has to carry them.
type Decimal struct {
	Bits  int // 32, 64 or 128
	Bytes []byte
}

// List is an AMQP list: a sequence of polymorphic values.
type List []any

// KeyValue is one entry of a Map.
type KeyValue struct {
	Key   any
	Value any
}

// Map is an AMQP map. It keeps the wire order so a decoded map re-encodes
// byte for byte, and it allows keys Go maps cannot hold (lists, binary).
type Map []KeyValue

// Get returns the value for the first key equal to k. Keys compare by Go
// equality, so Symbol("a") and "a" are different keys, as in AMQP.
func (m Map) Get(k any) (any, bool) {
	for _, kv := range m {
		if keyEqual(kv.Key, k) {
			return kv.Value, true
		}
	}
	return nil, false
}

// Set replaces the value of key k or appends a new entry.
func (m Map) Set(k, v any) Map {
	for i, kv := range m {
		if keyEqual(kv.Key, k) {
			m[i].Value = v
			return m
		}
	}
	return append(m, KeyValue{Key: k, Value: v})
}

func keyEqual(a, b any) bool {
	switch a.(type) {
	case List, Map, Array, []byte, Described, Decimal:
		return false
	}
	switch b.(type) {
	case List, Map, Array, []byte, Described, Decimal:
		return false
	}
	return a == b
}

// Array is an AMQP array: a sequence of values that share one constructor.
// Elems hold the decoded Go values (all of the same Go type). When Elems is
// empty, Constructor says which element constructor to write (0 means sym8).
type Array struct {
	Constructor byte
	Elems       []any
}

// Described is an AMQP described value: a descriptor (usually uint64 or
// Symbol) followed by the value it describes.
type Described struct {
	Descriptor any
	Value      any
}

// Format codes of the AMQP 1.0 type system (part 1, section 1.6).
const (
	codeDescribed  = 0x00
	codeNull       = 0x40
	codeTrue       = 0x41
	codeFalse      = 0x42
	codeUint0      = 0x43
	codeUlong0     = 0x44
	codeList0      = 0x45
	codeUbyte      = 0x50
	codeByte       = 0x51
	codeSmallUint  = 0x52
	codeSmallUlong = 0x53
	codeSmallInt   = 0x54
	codeSmallLong  = 0x55
	codeBool       = 0x56
	codeUshort     = 0x60
	codeShort      = 0x61
	codeUint       = 0x70
	codeInt        = 0x71
	codeFloat      = 0x72
	codeChar       = 0x73
	codeDecimal32  = 0x74
	codeUlong      = 0x80
	codeLong       = 0x81
	codeDouble     = 0x82
	codeTimestamp  = 0x83
	codeDecimal64  = 0x84
	codeDecimal128 = 0x94
	codeUUID       = 0x98
	codeVbin8      = 0xa0
	codeStr8       = 0xa1
	codeSym8       = 0xa3
	codeVbin32     = 0xb0
	codeStr32      = 0xb1
	codeSym32      = 0xb3
	codeList8      = 0xc0
	codeMap8       = 0xc1
	codeList32     = 0xd0
	codeMap32      = 0xd1
	codeArray8     = 0xe0
	codeArray32    = 0xf0
)

// toTimestamp converts AMQP milliseconds since the Unix epoch to UTC time.
func toTimestamp(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// DecodeError reports malformed input: what was being decoded and where.
type DecodeError struct {
	What   string // the value or performative being decoded
	Offset int    // byte offset within the slice given to the decoder
	Reason string
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("amqp: decode %s at offset %d: %s", e.What, e.Offset, e.Reason)
}
