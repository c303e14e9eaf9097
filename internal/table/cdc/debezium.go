package cdc

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// A Debezium change event, as Debezium's JSON converter writes it, comes in
// two forms:
//
//	{"schema": {...}, "payload": {"before": {...}, "after": {...}, "op": "u", "source": {...}, "ts_ms": 1}}
//	{"before": {...}, "after": {...}, "op": "u", "source": {...}, "ts_ms": 1}
//
// (value.converter.schemas.enable true or false). The first carries the
// Kafka Connect schema of every field, which says how a value is encoded:
// a timestamp as epoch microseconds, a decimal as base64 of its unscaled
// bytes. With it, the values the mapping cannot read as they are become
// the text it reads (decodeDebezium's conversions); without it, values
// stay as Debezium wrote them.

// envelope is the top level of either form.
type envelope struct {
	Schema  json.RawMessage `json:"schema"`
	Payload json.RawMessage `json:"payload"`
	changePayload
}

// changePayload is the change itself.
type changePayload struct {
	Op     *string         `json:"op"`
	Before json.RawMessage `json:"before"`
	After  json.RawMessage `json:"after"`
}

// connectSchema is a Kafka Connect schema as the JSON converter writes it.
type connectSchema struct {
	Type       string            `json:"type"`
	Name       string            `json:"name"`
	Field      string            `json:"field"`
	Fields     []connectSchema   `json:"fields"`
	Parameters map[string]string `json:"parameters"`
}

// debeziumChange is a decoded change event: its op and the before and
// after images, each nil when absent or null, with the schema's
// conversions applied.
type debeziumChange struct {
	op            string
	before, after []byte
}

// errNotEnvelope says a body is JSON but not a Debezium change event.
var errNotEnvelope = errors.New(`not a Debezium change event (want {"op", "before", "after", ...}, or that object as the "payload" of {"schema", "payload"})`)

// decodeDebezium decodes a change event body in either form.
func decodeDebezium(body []byte) (debeziumChange, error) {
	var env envelope
	if err := json.Unmarshal(body, &env); err != nil {
		return debeziumChange{}, envelopeError("", err)
	}
	p := env.changePayload
	var schema *connectSchema
	if isJSONValue(env.Payload) && p.Op == nil {
		if err := json.Unmarshal(env.Payload, &p); err != nil {
			return debeziumChange{}, envelopeError("payload", err)
		}
		if isJSONValue(env.Schema) {
			schema = new(connectSchema)
			if err := json.Unmarshal(env.Schema, schema); err != nil {
				return debeziumChange{}, envelopeError("schema", err)
			}
		}
	}
	if p.Op == nil {
		return debeziumChange{}, errNotEnvelope
	}
	c := debeziumChange{op: *p.Op}
	var err error
	if c.before, err = image(p.Before, schema.field("before")); err != nil {
		return debeziumChange{}, fmt.Errorf("Debezium change event: before: %w", err)
	}
	if c.after, err = image(p.After, schema.field("after")); err != nil {
		return debeziumChange{}, fmt.Errorf("Debezium change event: after: %w", err)
	}
	return c, nil
}

// envelopeError says in the user's terms what is wrong with a body that
// encoding/json could not decode as an envelope: the value of the wrong
// JSON type (the whole body, or a field of the part named in), or the
// syntax error. encoding/json's own text names Go types
// ("cannot unmarshal array into Go value of type cdc.envelope").
func envelopeError(in string, err error) error {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		if in == "" {
			return fmt.Errorf("Debezium change event: %w", err)
		}
		return fmt.Errorf("Debezium change event: %s: %w", in, err)
	}
	field := strings.TrimPrefix(te.Field, "changePayload.") // the embedded struct, not a JSON key
	where := "the body"
	switch {
	case in != "" && field != "":
		where = in + "." + field
	case in != "":
		where = in
	case field != "":
		where = field
	}
	want := "an object"
	if t := te.Type; t != nil {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch t.Kind() {
		case reflect.String:
			want = "a string"
		case reflect.Slice:
			want = "an array"
		}
	}
	if where == "the body" {
		return fmt.Errorf("%w: the body is a JSON %s", errNotEnvelope, te.Value)
	}
	return fmt.Errorf("Debezium change event: %s is a JSON %s, want %s", where, te.Value, want)
}

// decodeDebeziumKey decodes a Debezium record key (what Debezium Server
// sends as the Event Hubs partition key): {"id": 1} or
// {"schema": {...}, "payload": {"id": 1}}.
func decodeDebeziumKey(key []byte) ([]byte, error) {
	var env struct {
		Schema  *connectSchema  `json:"schema"`
		Payload json.RawMessage `json:"payload"`
	}
	if err := json.Unmarshal(key, &env); err != nil {
		return nil, fmt.Errorf("Debezium record key: %w", err)
	}
	if env.Schema != nil && isJSONValue(env.Payload) {
		return image(env.Payload, env.Schema)
	}
	return image(key, nil)
}

// isJSONValue reports whether raw holds a value other than null.
func isJSONValue(raw json.RawMessage) bool {
	return len(raw) > 0 && !bytes.Equal(raw, []byte("null"))
}

// field returns the schema of the struct field named name, or nil.
func (s *connectSchema) field(name string) *connectSchema {
	if s == nil {
		return nil
	}
	for i := range s.Fields {
		if s.Fields[i].Field == name {
			return &s.Fields[i]
		}
	}
	return nil
}

// image returns a row image (an object, or nil for null) with the values
// its schema encodes rewritten into what the mapping reads.
func image(raw json.RawMessage, schema *connectSchema) ([]byte, error) {
	if !isJSONValue(raw) {
		return nil, nil
	}
	if raw[0] != '{' {
		return nil, errors.New("not an object")
	}
	if schema == nil || !needsConversion(schema) {
		return raw, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, err
	}
	changed := false
	for i := range schema.Fields {
		f := &schema.Fields[i]
		v, ok := obj[f.Field]
		if !ok || !isJSONValue(v) {
			continue
		}
		nv, err := convert(v, f)
		if err != nil {
			return nil, fmt.Errorf("field %q (%s): %w", f.Field, f.Name, err)
		}
		if nv != nil {
			obj[f.Field], changed = nv, true
		}
	}
	if !changed {
		return raw, nil
	}
	return json.Marshal(obj)
}

// needsConversion reports whether any field of a struct schema has a
// logical type convert rewrites.
func needsConversion(s *connectSchema) bool {
	for i := range s.Fields {
		if _, ok := conversions[s.Fields[i].Name]; ok {
			return true
		}
	}
	return false
}

// conversions are the logical types (Connect schema names) whose JSON
// encoding the mapping does not read as it is, and how each becomes text
// it reads: timestamps become RFC 3339 text (UTC), dates midnight UTC of
// the day, times of day "15:04:05.999999", decimals their plain decimal
// text, and JSON held in a string the JSON itself. Every other value is
// left as it is.
var conversions = map[string]func(raw json.RawMessage, params map[string]string) (json.RawMessage, error){
	"org.apache.kafka.connect.data.Timestamp": epoch(time.Millisecond),
	"io.debezium.time.Timestamp":              epoch(time.Millisecond),
	"io.debezium.time.MicroTimestamp":         epoch(time.Microsecond),
	"io.debezium.time.NanoTimestamp":          epoch(time.Nanosecond),
	"org.apache.kafka.connect.data.Date":      days,
	"io.debezium.time.Date":                   days,
	"org.apache.kafka.connect.data.Time":      timeOfDay(time.Millisecond),
	"io.debezium.time.Time":                   timeOfDay(time.Millisecond),
	"io.debezium.time.MicroTime":              timeOfDay(time.Microsecond),
	"io.debezium.time.NanoTime":               timeOfDay(time.Nanosecond),
	"org.apache.kafka.connect.data.Decimal":   connectDecimal,
	"io.debezium.data.VariableScaleDecimal":   variableScaleDecimal,
	"io.debezium.data.Json":                   embeddedJSON,
}

// convert applies the conversion of f's logical type to v, or returns nil
// when there is none.
func convert(v json.RawMessage, f *connectSchema) (json.RawMessage, error) {
	conv, ok := conversions[f.Name]
	if !ok {
		return nil, nil
	}
	return conv(v, f.Parameters)
}

func epoch(unit time.Duration) func(json.RawMessage, map[string]string) (json.RawMessage, error) {
	return func(raw json.RawMessage, _ map[string]string) (json.RawMessage, error) {
		n, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s is not an integer", raw)
		}
		var t time.Time
		switch unit {
		case time.Millisecond:
			t = time.UnixMilli(n)
		case time.Microsecond:
			t = time.UnixMicro(n)
		default:
			t = time.Unix(0, n)
		}
		return jsonString(t.UTC().Format(time.RFC3339Nano)), nil
	}
}

func days(raw json.RawMessage, _ map[string]string) (json.RawMessage, error) {
	n, err := strconv.ParseInt(string(raw), 10, 32)
	if err != nil {
		return nil, fmt.Errorf("%s is not a day number", raw)
	}
	return jsonString(time.Unix(0, 0).UTC().AddDate(0, 0, int(n)).Format(time.RFC3339)), nil
}

func timeOfDay(unit time.Duration) func(json.RawMessage, map[string]string) (json.RawMessage, error) {
	return func(raw json.RawMessage, _ map[string]string) (json.RawMessage, error) {
		n, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s is not an integer", raw)
		}
		return jsonString(time.Unix(0, 0).UTC().Add(time.Duration(n) * unit).Format("15:04:05.999999999")), nil
	}
}

// connectDecimal decodes base64 of a big-endian two's complement unscaled
// value, with the scale in the schema's parameters.
func connectDecimal(raw json.RawMessage, params map[string]string) (json.RawMessage, error) {
	scale, err := strconv.Atoi(params["scale"])
	if err != nil {
		return nil, fmt.Errorf("decimal schema without a scale parameter")
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		// decimal.handling.mode string or double: already readable.
		return nil, nil
	}
	return decimalText(s, scale)
}

// variableScaleDecimal decodes {"scale": s, "value": base64}.
func variableScaleDecimal(raw json.RawMessage, _ map[string]string) (json.RawMessage, error) {
	var v struct {
		Scale *int   `json:"scale"`
		Value string `json:"value"`
	}
	if err := json.Unmarshal(raw, &v); err != nil || v.Scale == nil {
		return nil, errors.New(`want {"scale": n, "value": base64}`)
	}
	return decimalText(v.Value, *v.Scale)
}

func decimalText(b64 string, scale int) (json.RawMessage, error) {
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, errors.New("decimal value is not base64")
	}
	n := new(big.Int).SetBytes(b)
	if len(b) > 0 && b[0]&0x80 != 0 { // negative: two's complement
		n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
	}
	digits := n.String()
	neg := digits[0] == '-'
	if neg {
		digits = digits[1:]
	}
	if scale > 0 {
		for len(digits) <= scale {
			digits = "0" + digits
		}
		digits = digits[:len(digits)-scale] + "." + digits[len(digits)-scale:]
	} else if scale < 0 {
		digits += string(bytes.Repeat([]byte{'0'}, -scale))
	}
	if neg {
		digits = "-" + digits
	}
	return jsonString(digits), nil
}

// embeddedJSON turns JSON text held in a string into the JSON itself.
func embeddedJSON(raw json.RawMessage, _ map[string]string) (json.RawMessage, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, nil // already JSON
	}
	if !json.Valid([]byte(s)) {
		return nil, errors.New("io.debezium.data.Json value is not valid JSON")
	}
	return json.RawMessage(s), nil
}

func jsonString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}
