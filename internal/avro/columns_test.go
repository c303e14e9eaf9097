package avro

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ehsink/ehsink/internal/table/mapping"
	"github.com/ehsink/ehsink/sinks"
)

// everyType has a field of each kind columns: auto maps.
const everyType = `{"type":"record","name":"Every","namespace":"t","fields":[
 {"name":"id","type":"long"},
 {"name":"n","type":"int"},
 {"name":"ok","type":"boolean"},
 {"name":"f","type":"float"},
 {"name":"d","type":"double"},
 {"name":"s","type":"string"},
 {"name":"e","type":{"type":"enum","name":"E","symbols":["A","B"]}},
 {"name":"raw","type":"bytes"},
 {"name":"fx","type":{"type":"fixed","name":"F4","size":4}},
 {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":12,"scale":2}},
 {"name":"famount","type":{"type":"fixed","name":"F8","size":8,"logicalType":"decimal","precision":18,"scale":4}},
 {"name":"at_ms","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"at_us","type":{"type":"long","logicalType":"timestamp-micros"}},
 {"name":"local_ms","type":{"type":"long","logicalType":"local-timestamp-millis"}},
 {"name":"day","type":{"type":"int","logicalType":"date"}},
 {"name":"tod","type":{"type":"int","logicalType":"time-millis"}},
 {"name":"ref","type":{"type":"string","logicalType":"uuid"}},
 {"name":"fref","type":{"type":"fixed","name":"U16","size":16,"logicalType":"uuid"}},
 {"name":"note","type":["null","string"],"default":null},
 {"name":"maybe_at","type":["null",{"type":"long","logicalType":"timestamp-micros"}],"default":null},
 {"name":"either","type":["null","int","string"],"default":null},
 {"name":"tags","type":{"type":"array","items":"string"}},
 {"name":"attrs","type":{"type":"map","values":"int"}},
 {"name":"customer","type":{"type":"record","name":"C","fields":[
   {"name":"name","type":"string"},
   {"name":"address","type":["null",{"type":"record","name":"A","fields":[{"name":"city","type":"string"}]}],"default":null}]}},
 {"name":"next","type":["null","Every"],"default":null}
]}`

func describeColumns(cols mapping.Columns) string {
	var b strings.Builder
	for _, c := range cols {
		null := ""
		if c.Nullable {
			null = " null"
		}
		fmt.Fprintf(&b, "%s %s %s%s\n", c.Name, c.From, c.Type, null)
	}
	return b.String()
}

const metaCols = `partition @partition string
seq @sequence_number int64
enqueued_at @enqueued_time timestamp
`

func TestColumns(t *testing.T) {
	s, err := ParseSchema(everyType)
	if err != nil {
		t.Fatal(err)
	}
	fields := `id $.id int64
n $.n int32
ok $.ok boolean
f $.f double
d $.d double
s $.s string
e $.e string
raw $.raw bytes
fx $.fx bytes
amount $.amount decimal(12,2)
famount $.famount decimal(18,4)
at_ms $.at_ms timestamp(ms)
at_us $.at_us timestamp
local_ms $.local_ms timestamp(ms)
day $.day timestamp
tod $.tod string
ref $.ref uuid
fref $.fref uuid
note $.note string null
maybe_at $.maybe_at timestamp null
either $.either json null
tags $.tags json
attrs $.attrs json
`
	for _, tc := range []struct {
		name string
		opts ColumnOptions
		want string
	}{
		{"nested as json", ColumnOptions{}, metaCols + fields + "customer $.customer json\nnext $.next json null\n"},
		{"flatten", ColumnOptions{Flatten: true}, metaCols + fields +
			// address is nullable, so its fields are; next recurs into
			// Every, which stays one json column.
			"customer_name $.customer.name string\ncustomer_address_city $.customer.address.city string null\nnext $.next json null\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cols, err := Columns(s, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := describeColumns(cols); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
			if err := cols.Validate(); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestColumnsAllNullable(t *testing.T) {
	s, err := ParseSchema(`{"type":"record","name":"R","fields":[{"name":"a","type":"long"},{"name":"b","type":{"type":"record","name":"B","fields":[{"name":"c","type":"int"}]}}]}`)
	if err != nil {
		t.Fatal(err)
	}
	cols, err := Columns(s, ColumnOptions{AllNullable: true, Flatten: true})
	if err != nil {
		t.Fatal(err)
	}
	want := metaCols + "a $.a int64 null\nb_c $.b.c int32 null\n"
	if got := describeColumns(cols); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestColumnsRefused(t *testing.T) {
	for _, tc := range []struct{ name, schema, want string }{
		{"not a record", `"string"`, "not a record"},
		{"metadata name", `{"type":"record","name":"R","fields":[{"name":"seq","type":"long"}]}`, `column "seq" is also the column of @sequence_number`},
		{"flattened name", `{"type":"record","name":"R","fields":[{"name":"a_b","type":"long"},{"name":"a","type":{"type":"record","name":"A","fields":[{"name":"b","type":"int"}]}}]}`, `column "a_b" is also the column of $.a_b`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ParseSchema(tc.schema)
			if err != nil {
				t.Fatal(err)
			}
			_, err = Columns(s, ColumnOptions{Flatten: true})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// TestColumnsMapRenderedValues maps what a Program renders with the
// derived columns: each type parses what the rendering writes.
func TestColumnsMapRenderedValues(t *testing.T) {
	s, err := ParseSchema(everyType)
	if err != nil {
		t.Fatal(err)
	}
	body, err := Encode(s, []byte(`{"id":7,"n":-3,"ok":true,"f":1.5,"d":2.25,"s":"x","e":"B","raw":"AQI=","fx":"AQIDBA==",
		"amount":12.30,"famount":-1.0001,"at_ms":"2024-05-01T12:00:00.123Z","at_us":"2024-05-01T12:00:00.123456Z",
		"local_ms":"2024-05-01T12:00:00.5Z","day":"2024-05-01T00:00:00Z","tod":"13:14:15.000",
		"ref":"6ba7b810-9dad-11d1-80b4-00c04fd430c8","fref":"6ba7b810-9dad-11d1-80b4-00c04fd430c8",
		"note":"hi","maybe_at":null,"either":"s","tags":["a"],"attrs":{"k":1},
		"customer":{"name":"Ann","address":{"city":"Oslo"}},"next":null}`))
	if err != nil {
		t.Fatal(err)
	}
	prog, err := Compile(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	js, err := prog.AppendJSON(nil, body)
	if err != nil {
		t.Fatal(err)
	}
	cols, err := Columns(s, ColumnOptions{Flatten: true})
	if err != nil {
		t.Fatal(err)
	}
	m, err := mapping.Compile(cols)
	if err != nil {
		t.Fatal(err)
	}
	ev := sinks.Event{Partition: "0", SequenceNumber: 9, EnqueuedTime: time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC), Body: js}
	row := make([]any, len(cols))
	if err := m.Map(&ev, row); err != nil {
		t.Fatalf("map %s: %v", js, err)
	}
	got := map[string]string{}
	for i, c := range cols {
		got[c.Name] = fmt.Sprintf("%v", row[i])
		if d, ok := row[i].(mapping.Decimal); ok {
			got[c.Name] = d.String()
		}
		if j, ok := row[i].(json.RawMessage); ok {
			got[c.Name] = string(j)
		}
		if ts, ok := row[i].(time.Time); ok {
			got[c.Name] = ts.Format(time.RFC3339Nano)
		}
	}
	for name, want := range map[string]string{
		"seq": "9", "id": "7", "n": "-3", "ok": "true", "d": "2.25", "e": "B", "raw": "[1 2]",
		"amount": "12.30", "famount": "-1.0001",
		"at_ms": "2024-05-01T12:00:00.123Z", "at_us": "2024-05-01T12:00:00.123456Z", "day": "2024-05-01T00:00:00Z",
		"ref":  "[107 167 184 16 157 173 17 209 128 180 0 192 79 212 48 200]",
		"fref": "[107 167 184 16 157 173 17 209 128 180 0 192 79 212 48 200]",
		"note": "hi", "maybe_at": "<nil>", "either": `"s"`, "tags": `["a"]`, "attrs": `{"k":1}`,
		"customer_name": "Ann", "customer_address_city": "Oslo", "next": "<nil>",
	} {
		if got[name] != want {
			t.Errorf("%s = %s, want %s", name, got[name], want)
		}
	}
}
