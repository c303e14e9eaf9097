package cdc

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ehsink/ehsink/internal/table/mapping"
	"github.com/ehsink/ehsink/sinks"
)

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "debezium", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func columns(t *testing.T, specs ...string) mapping.Columns {
	t.Helper()
	var cs mapping.Columns
	for _, s := range specs {
		parts := strings.SplitN(s, "|", 3)
		for len(parts) < 3 {
			parts = append(parts, "")
		}
		c, err := mapping.NewColumn(parts[0], parts[1], parts[2])
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	return cs
}

// customers is the mapping of the fixtures' inventory.customers table.
func customers(t *testing.T, createdAt string) Spec {
	return Spec{
		Format: FormatDebezium,
		Key:    []string{"id"},
		Columns: columns(t, "id|$.id|int32", "first_name|$.first_name", "email|$.email",
			"created_at|$.created_at|"+createdAt, "balance|$.balance|numeric(10,2)",
			"profile|$.profile|json", "birthday|$.birthday|timestamp"),
	}
}

// show prints a row as name=value pairs, for comparison.
func show(cols mapping.Columns, row []any) string {
	var b strings.Builder
	for i, v := range row {
		if i > 0 {
			b.WriteByte(' ')
		}
		switch x := v.(type) {
		case time.Time:
			v = x.Format(time.RFC3339Nano)
		case json.RawMessage:
			v = string(x)
		case mapping.Decimal:
			v = x.String()
		}
		fmt.Fprintf(&b, "%s=%v", cols[i].Name, v)
	}
	return b.String()
}

func TestDebeziumFixtures(t *testing.T) {
	key := `{"id":1002}`
	tests := []struct {
		file      string
		createdAt string // the column type of created_at
		key       *string
		op        Op
		want      string // the row, or the error's text
	}{
		{"schema_read.json", "timestamp", nil, OpUpsert,
			`id=1001 first_name=Sally email=sally.thomas@acme.com created_at=2026-03-01T10:00:00.123456Z balance=1234.50 profile={"tier":"gold","tags":["a","b"]} birthday=2026-03-01T00:00:00Z`},
		{"schema_create.json", "timestamp", nil, OpUpsert,
			`id=1001 first_name=Sally email=sally.thomas@acme.com created_at=2026-03-01T10:00:00.123456Z balance=1234.50 profile={"tier":"gold","tags":["a","b"]} birthday=2026-03-01T00:00:00Z`},
		{"schema_update.json", "timestamp", nil, OpUpsert,
			`id=1001 first_name=Sally email=sally@example.com created_at=2026-03-01T10:00:00.123456Z balance=-1.00 profile={"tier":"gold","tags":["a","b"]} birthday=2026-03-01T00:00:00Z`},
		{"schema_delete.json", "timestamp", nil, OpDelete,
			`id=1001 first_name=<nil> email=<nil> created_at=<nil> balance=<nil> profile=<nil> birthday=<nil>`},
		// Without the schema, values stay as Debezium encodes them: the
		// microseconds of created_at fit a bigint column, and the profile
		// is the JSON text in a string.
		{"plain_create.json", "bigint", nil, OpUpsert,
			`id=1002 first_name=George email=gbailey@foobar.com created_at=1772359200123456 balance=12.50 profile="{\"tier\": \"silver\"}" birthday=<nil>`},
		{"plain_update.json", "bigint", nil, OpUpsert,
			`id=1002 first_name=George email=george@bailey.org created_at=1772359200123456 balance=13.75 profile=<nil> birthday=<nil>`},
		{"plain_delete.json", "bigint", nil, OpDelete,
			`id=1002 first_name=<nil> email=<nil> created_at=<nil> balance=<nil> profile=<nil> birthday=<nil>`},
		{"plain_delete_nobefore.json", "bigint", &key, OpDelete,
			`id=1002 first_name=<nil> email=<nil> created_at=<nil> balance=<nil> profile=<nil> birthday=<nil>`},
		{"plain_delete_nobefore.json", "bigint", nil, OpDelete,
			`error: Debezium delete without a before image or a record key in the partition key`},
		{"plain_truncate.json", "bigint", nil, OpUpsert,
			`error: Debezium op "t" (truncate) is not replicated`},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			r, err := Compile(customers(t, tt.createdAt))
			if err != nil {
				t.Fatal(err)
			}
			row := make([]any, len(r.Columns()))
			op, err := r.Map(&sinks.Event{Body: fixture(t, tt.file), PartitionKey: tt.key}, row)
			got := show(r.Columns(), row)
			if err != nil {
				got = "error: " + err.Error()
			}
			if op != tt.op || !strings.HasPrefix(got, tt.want) {
				t.Errorf("got %s %s\nwant %s %s", op, got, tt.op, tt.want)
			}
		})
	}
}

func TestDebeziumKeyWithSchema(t *testing.T) {
	r, err := Compile(customers(t, "bigint"))
	if err != nil {
		t.Fatal(err)
	}
	key := strings.TrimSpace(string(fixture(t, "key_schema.json")))
	row := make([]any, len(r.Columns()))
	op, err := r.Map(&sinks.Event{Body: fixture(t, "plain_delete_nobefore.json"), PartitionKey: &key}, row)
	if err != nil || op != OpDelete || row[0] != int32(1002) {
		t.Fatalf("got %s %v %v, want a delete of id 1002", op, row, err)
	}
}

func TestDebeziumSkipsTombstones(t *testing.T) {
	r, err := Compile(customers(t, "bigint"))
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{"", "null", " null\n"} {
		row := make([]any, len(r.Columns()))
		if op, err := r.Map(&sinks.Event{Body: []byte(body)}, row); op != OpSkip || err != nil {
			t.Errorf("body %q: got %s %v, want skip", body, op, err)
		}
	}
}

func TestDebeziumBadInput(t *testing.T) {
	r, err := Compile(customers(t, "bigint"))
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]string{
		`{"id": 1}`:                                "not a Debezium change event",
		`[1, 2]`:                                   `not a Debezium change event (want {"op", "before", "after", ...}, or that object as the "payload" of {"schema", "payload"}): the body is a JSON array`,
		`"text"`:                                   "not a Debezium change event",
		`{"op": 5}`:                                "Debezium change event: op is a JSON number, want a string",
		`{"payload": [1]}`:                         "Debezium change event: payload is a JSON array, want an object",
		`{"payload": {"op": true}}`:                "Debezium change event: payload.op is a JSON bool, want a string",
		`{"op": "c"`:                               "Debezium change event: unexpected end of JSON input",
		`{"op": "c", "after": null}`:               `op "c" without an after image`,
		`{"op": "c", "after": [1]}`:                "after: not an object",
		`{"op": "m", "after": null}`:               `op "m" is not a row change`,
		`{"op": "c", "after": {"id": "x"}}`:        `column "id"`,
		`{"op": "d", "before": {"name": "no id"}}`: `column "id": missing value`,
		`{"payload": {"op": "c", "after": {"id": 1, "balance": "%%"}}, "schema": {"fields": [{"field": "after", "fields": [{"field": "balance", "name": "org.apache.kafka.connect.data.Decimal", "parameters": {"scale": "2"}}]}]}}`: "decimal value is not base64",
	}
	for body, want := range tests {
		row := make([]any, len(r.Columns()))
		_, err := r.Map(&sinks.Event{Body: []byte(body)}, row)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("body %s: got %v, want an error containing %q", body, err, want)
		}
	}
}

func TestDecimalText(t *testing.T) {
	tests := []struct {
		unscaled []byte
		scale    int
		want     string
	}{
		{[]byte{0x01, 0xE2, 0x3A}, 2, "1234.50"},
		{[]byte{0x9C}, 2, "-1.00"},
		{[]byte{0x05}, 3, "0.005"},
		{[]byte{0xFF}, 0, "-1"},
		{[]byte{0x00, 0x80}, 1, "12.8"},
		{[]byte{0x07}, -2, "700"},
	}
	for _, tt := range tests {
		got, err := decimalText(b64(tt.unscaled), tt.scale)
		if err != nil || string(got) != `"`+tt.want+`"` {
			t.Errorf("%x scale %d: got %s %v, want %s", tt.unscaled, tt.scale, got, err, tt.want)
		}
	}
}

func TestDebeziumTimeConversions(t *testing.T) {
	tests := []struct {
		name string
		raw  string
		want string
	}{
		{"io.debezium.time.Timestamp", "1772359200123", "2026-03-01T10:00:00.123Z"},
		{"org.apache.kafka.connect.data.Timestamp", "0", "1970-01-01T00:00:00Z"},
		{"io.debezium.time.NanoTimestamp", "1772359200123456789", "2026-03-01T10:00:00.123456789Z"},
		{"org.apache.kafka.connect.data.Date", "-1", "1969-12-31T00:00:00Z"},
		{"io.debezium.time.Time", "3723004", "01:02:03.004"},
		{"io.debezium.time.MicroTime", "3723000005", "01:02:03.000005"},
		{"io.debezium.time.NanoTime", "3723000000007", "01:02:03.000000007"},
		{"io.debezium.data.VariableScaleDecimal", `{"scale": 3, "value": "AeI6"}`, "123.450"},
	}
	for _, tt := range tests {
		got, err := convert(json.RawMessage(tt.raw), &connectSchema{Name: tt.name})
		if err != nil || string(got) != `"`+tt.want+`"` {
			t.Errorf("%s %s: got %s %v, want %s", tt.name, tt.raw, got, err, tt.want)
		}
	}
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
