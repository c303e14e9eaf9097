package mapping

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ehsink/ehsink/sinks"
)

func mustColumns(t testing.TB, specs ...string) Columns {
	t.Helper()
	var cs Columns
	for _, s := range specs {
		parts := strings.SplitN(s, "|", 3)
		for len(parts) < 3 {
			parts = append(parts, "")
		}
		c, err := NewColumn(parts[0], parts[1], parts[2])
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	return cs
}

func mapOne(t *testing.T, col string, body string) (any, error) {
	t.Helper()
	m, err := Compile(mustColumns(t, col))
	if err != nil {
		t.Fatal(err)
	}
	row := make([]any, 1)
	err = m.Map(&sinks.Event{Body: []byte(body)}, row)
	return row[0], err
}

func TestMapConversions(t *testing.T) {
	ts := time.Date(2024, 5, 6, 7, 8, 9, 123456000, time.UTC)
	tests := []struct {
		col  string
		body string
		want any
	}{
		{"c|$.v", `{"v":"hi"}`, "hi"},
		{"c|$.v", `{"v":"a\"b\u00e9\ud83d\ude00"}`, "a\"bé😀"},
		{"c|$.v", `{"v":12.50}`, "12.50"},
		{"c|$.v", `{"v":true}`, "true"},
		{"c|$.v", `{"v":{"x":[1, 2]}}`, `{"x":[1, 2]}`},
		{"c|$.v", `{"v":null}`, nil},
		{"c|$.v", `{}`, nil},
		{"c|$.a.b[1].c|bigint", `{"a":{"b":[{"c":1},{"c":-42}]}}`, int64(-42)},
		{"c|$['a b']|int32", `{"a b":7}`, int32(7)},
		{"c|$.v|bigint", `{"v":"9223372036854775807"}`, int64(9223372036854775807)},
		{"c|$.v|double", `{"v":1.5e3}`, 1500.0},
		{"c|$.v|double", `{"v":"2.25"}`, 2.25},
		{"c|$.v|boolean", `{"v":false}`, false},
		{"c|$.v|boolean", `{"v":"true"}`, true},
		{"c|$.v|numeric(12,2)", `{"v":12.345}`, Decimal{Coef: 1235, Scale: 2}},
		{"c|$.v|numeric(12,2)", `{"v":-12.344}`, Decimal{Coef: -1234, Scale: 2}},
		{"c|$.v|numeric(12,2)", `{"v":"7"}`, Decimal{Coef: 700, Scale: 2}},
		{"c|$.v|numeric(5,0)", `{"v":1.2e2}`, Decimal{Coef: 120}},
		{"c|$.v|numeric(4,2)", `{"v":99.999}`, nil}, // rounds to 100.00: too many digits
		{"c|$.v|numeric", `{"v":1.230}`, Decimal{Coef: 1230, Scale: 3}},
		{"c|$.v|timestamptz", `{"v":"2024-05-06T09:08:09.1234567+02:00"}`, ts},
		{"c|$.v|timestamp(ms)", `{"v":"2024-05-06T07:08:09.123456Z"}`, ts.Truncate(time.Millisecond)},
		{"c|$.v|timestamptz", `{"v":1714979289123}`, time.UnixMilli(1714979289123).UTC()},
		{"c|$.v|jsonb", `{"v": {"a": [1,2]} }`, json.RawMessage(`{"a": [1,2]}`)},
		{"c|$.v|jsonb", `{"v":"s"}`, json.RawMessage(`"s"`)},
		{"c|$.v|uuid", `{"v":"123e4567-e89b-12d3-a456-426614174000"}`, [16]byte{0x12, 0x3e, 0x45, 0x67, 0xe8, 0x9b, 0x12, 0xd3, 0xa4, 0x56, 0x42, 0x66, 0x14, 0x17, 0x40, 0x00}},
		{"c|$.v|uuid", `{"v":"123E4567E89B12D3A456426614174000"}`, [16]byte{0x12, 0x3e, 0x45, 0x67, 0xe8, 0x9b, 0x12, 0xd3, 0xa4, 0x56, 0x42, 0x66, 0x14, 0x17, 0x40, 0x00}},
		{"c|$.v|bytea", `{"v":"aGk="}`, []byte("hi")},
		{"c|$|jsonb", ` {"v":1} `, json.RawMessage(`{"v":1}`)},
		{"c|@body|bytea", `not json`, []byte("not json")},
		{"c|@body", `{"v":1}`, json.RawMessage(`{"v":1}`)},
	}
	for _, tt := range tests {
		t.Run(tt.col+" "+tt.body, func(t *testing.T) {
			got, err := mapOne(t, tt.col, tt.body)
			if tt.want == nil && err != nil {
				return // an expected failure (checked in TestMapErrors) or NULL
			}
			if err != nil {
				t.Fatal(err)
			}
			if tm, ok := tt.want.(time.Time); ok {
				if g, ok := got.(time.Time); !ok || !g.Equal(tm) || g.Location() != time.UTC {
					t.Fatalf("got %v, want %v (UTC)", got, tm)
				}
				return
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %#v (%T), want %#v (%T)", got, got, tt.want, tt.want)
			}
		})
	}
}

func TestMapMetadata(t *testing.T) {
	key, ct := "k1", "application/json"
	ev := &sinks.Event{
		Partition: "3", SequenceNumber: 77, Offset: "4096",
		EnqueuedTime: time.Date(2024, 1, 2, 3, 4, 5, 6000000, time.UTC),
		PartitionKey: &key, ContentType: &ct,
		Properties: map[string]any{"tenant": "acme", "n": int32(5), "f": 2.5, "b": true, "nil": nil},
		Body:       []byte(`{"x":1}`),
	}
	m, err := Compile(mustColumns(t,
		"p|@partition", "p_int|@partition|int32", "s|@sequence_number", "s_text|@sequence_number|text",
		"o|@offset", "e|@enqueued_time", "e_text|@enqueued_time|text", "k|@partition_key", "ct|@content_type",
		"tenant|@properties.tenant", "n|@properties.n|bigint", "f|@properties.f|numeric(4,1)", "b|@properties.b|boolean",
		"nil|@properties.nil", "absent|@properties.absent", "body|@body",
	))
	if err != nil {
		t.Fatal(err)
	}
	row := make([]any, len(m.Columns()))
	if err := m.Map(ev, row); err != nil {
		t.Fatal(err)
	}
	want := []any{"3", int32(3), int64(77), "77", "4096", ev.EnqueuedTime, "2024-01-02T03:04:05.006Z", "k1", "application/json",
		"acme", int64(5), Decimal{Coef: 25, Scale: 1}, true, nil, nil, json.RawMessage(`{"x":1}`)}
	for i := range want {
		if !reflect.DeepEqual(row[i], want[i]) {
			t.Errorf("column %s = %#v, want %#v", m.Columns()[i].Name, row[i], want[i])
		}
	}
}

func TestMapErrors(t *testing.T) {
	tests := []struct {
		cols []string
		body string
		want []string // substrings of the error
		is   error
	}{
		{[]string{"amount|$.amount|bigint"}, `{"amount":"abc"}`, []string{`column "amount": "abc" is not a number`}, nil},
		{[]string{"amount|$.amount|bigint"}, `{"amount":1.5}`, []string{`"1.5" is not an integer`}, nil},
		{[]string{"amount|$.amount|int32"}, `{"amount":3000000000}`, []string{"out of range"}, nil},
		{[]string{"amount|$.amount|numeric(4,2)"}, `{"amount":123.4}`, []string{`"123.4" does not fit decimal(4,2)`}, nil},
		{[]string{"t|$.t|timestamptz"}, `{"t":"yesterday"}`, []string{"not an RFC 3339 timestamp"}, nil},
		{[]string{"u|$.u|uuid"}, `{"u":"123"}`, []string{"not a UUID"}, nil},
		{[]string{"b|$.b|boolean"}, `{"b":1}`, []string{"not a boolean"}, nil},
		{[]string{"x|$.x|bytea"}, `{"x":"***"}`, []string{"not base64"}, nil},
		{[]string{"a|$.a", "b|$.b|bigint"}, `{"a":1,"b":"x"}`, []string{`column "b"`}, nil},
		{[]string{"a|$.a|bigint", "b|$.b|bigint"}, `{"a":"x","b":"y"}`, []string{`column "a"`, `column "b"`}, nil},
		{[]string{"a|$.a"}, `{"a":1`, []string{"invalid JSON body"}, ErrInvalidJSON},
		{[]string{"a|$.a"}, `{"a":1} x`, []string{"data after"}, ErrInvalidJSON},
		{[]string{"a|$.a"}, ``, []string{"empty body"}, ErrInvalidJSON},
		{[]string{"a|$.a"}, "{\"a\":\"\x01\"}", []string{"control character"}, ErrInvalidJSON},
		{[]string{"a|$.a"}, "{\"a\":\"\xff\"}", []string{"UTF-8"}, ErrInvalidJSON},
		{[]string{"a|@body"}, `nope`, []string{"invalid JSON"}, ErrInvalidJSON},
	}
	for _, tt := range tests {
		t.Run(tt.body, func(t *testing.T) {
			m, err := Compile(mustColumns(t, tt.cols...))
			if err != nil {
				t.Fatal(err)
			}
			err = m.Map(&sinks.Event{Body: []byte(tt.body)}, make([]any, len(tt.cols)))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %q is not %v", err, tt.is)
			}
		})
	}
}

func TestMapNullability(t *testing.T) {
	cols := mustColumns(t, "id|$.id|bigint")
	cols[0].Nullable = false
	m, err := Compile(cols)
	if err != nil {
		t.Fatal(err)
	}
	for body, want := range map[string]error{`{}`: ErrMissing, `{"id":null}`: ErrNull, `{"id":1}`: nil} {
		err := m.Map(&sinks.Event{Body: []byte(body)}, make([]any, 1))
		if !errors.Is(err, want) || (want == nil) != (err == nil) {
			t.Errorf("%s: error %v, want %v", body, err, want)
		}
		var ce *ColumnError
		if want != nil && (!errors.As(err, &ce) || ce.Column != "id") {
			t.Errorf("%s: error %v does not name the column", body, err)
		}
	}
}

// TestMapDoesNotAlias checks that values survive the reuse of the body.
func TestMapDoesNotAlias(t *testing.T) {
	m, err := Compile(mustColumns(t, "s|$.s", "j|$.j|jsonb", "b|$.b|bytea", "body|@body|bytea"))
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"s":"hello","j":[1],"b":"aGk="}`)
	row := make([]any, 4)
	if err := m.Map(&sinks.Event{Body: body}, row); err != nil {
		t.Fatal(err)
	}
	before := fmt.Sprint(row...)
	for i := range body {
		body[i] = 'x'
	}
	if after := fmt.Sprint(row...); after != before {
		t.Fatalf("row changed with the body: %s -> %s", before, after)
	}
}

func TestDecimalString(t *testing.T) {
	b, _ := new(big.Int).SetString("-123456789012345678901234", 10)
	for d, want := range map[*Decimal]string{
		{Coef: 1235, Scale: 2}:  "12.35",
		{Coef: -5, Scale: 3}:    "-0.005",
		{Coef: 42}:              "42",
		{Big: b, Scale: 4}:      "-12345678901234567890.1234",
		{Coef: 0, Scale: 2}:     "0.00",
		{Coef: -1200, Scale: 2}: "-12.00",
	} {
		if got := d.String(); got != want {
			t.Errorf("%+v.String() = %q, want %q", *d, got, want)
		}
	}
	got, err := mapOne(t, "c|$.v|numeric(30,4)", `{"v":-12345678901234567890.12344}`)
	if err != nil || got.(Decimal).String() != "-12345678901234567890.1234" {
		t.Fatalf("big decimal = %v, %v", got, err)
	}
}

// FuzzScan checks the scanner against encoding/json: both accept the same
// documents (the scanner is the body's validator), and the scanner never
// panics.
func FuzzScan(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"a":[{"v":1},2,[3],{"v":"x"}]}`, `{"a":[]}`, `[1,2,{"b":"c\u00e9"}]`, `"x"`, `{"a":`, `1e5`, `-0.5`, `{"a":"\ud800"}`, "\"\xff\"", ` null `, `{"a":1}}`, `01`} {
		f.Add([]byte(s))
	}
	m, err := Compile(mustColumns(f, "a|$.a", "b|$[2].b", "c|$|jsonb"))
	if err != nil {
		f.Fatal(err)
	}
	mx := mustExplode(f, "$.a", "v|$.v", "i|@index", "all|$|json")
	f.Fuzz(func(t *testing.T, body []byte) {
		err := m.Map(&sinks.Event{Body: body}, make([]any, 3))
		invalid := errors.Is(err, ErrInvalidJSON)
		// An exploding mapping validates the same way and never panics on
		// its elements.
		if r, xerr := mx.Rows(&sinks.Event{Body: body}); xerr == nil {
			for i := range r.Len() {
				_ = r.Map(i, make([]any, 3))
			}
			r.Close()
			if invalid {
				t.Fatalf("explode accepted %q, which Map finds invalid", body)
			}
		} else if errors.Is(xerr, ErrInvalidJSON) != invalid {
			t.Fatalf("explode error %v, Map error %v for %q", xerr, err, body)
		}
		// The scanner also rejects invalid UTF-8, which encoding/json
		// replaces: PostgreSQL would refuse it later for the whole batch.
		if valid := json.Valid(body) && utf8.Valid(body); valid == invalid {
			t.Fatalf("json.Valid = %v, scanner error = %v for %q", valid, err, body)
		}
	})
}

func BenchmarkMap(b *testing.B) {
	m, err := Compile(mustColumns(b,
		"order_id|$.order_id|bigint", "customer|$.customer.id", "amount|$.amount|numeric(12,2)",
		"qty|$.qty|integer", "price|$.price|double precision", "created|$.created_at|timestamptz",
		"paid|$.paid|boolean", "seq|@sequence_number"))
	if err != nil {
		b.Fatal(err)
	}
	ev := &sinks.Event{SequenceNumber: 12345, Body: []byte(`{"order_id":123456789,"customer":{"id":"cust-00042","name":"Jane Q. Public","tier":"gold"},"amount":"1234.56","qty":3,"price":411.52,"created_at":"2024-05-06T07:08:09.123Z","paid":true,"note":"leave at the door","tags":["a","b"]}`)}
	row := make([]any, 8)
	b.SetBytes(int64(len(ev.Body)))
	b.ReportAllocs()
	for b.Loop() {
		if err := m.Map(ev, row); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMapOrder maps demo orders of package produce (the shape
// `make bench-e2e` sends, about 230 bytes) by the columns of that
// benchmark: what ehsink maps per event end to end. The events differ as
// a real partition's do (order IDs, customers, currencies, times), so the
// figure does not flatter work that depends on values repeating; the
// enqueued time stays the same over runs of events, as it does over a
// batch the hub appends at once.
func BenchmarkMapOrder(b *testing.B) {
	m, err := Compile(mustColumns(b,
		"order_id|$.order_id|string", "customer|$.customer.id|string", "amount|$.amount|double",
		"currency|$.currency|string", "created_at|$.created_at|timestamp", "partition|@partition|string",
		"seq|@sequence_number|int64", "enqueued_at|@enqueued_time|timestamp"))
	if err != nil {
		b.Fatal(err)
	}
	evs := demoOrders(1024)
	row := make([]any, 8)
	size := 0
	for _, ev := range evs {
		size += len(ev.Body)
	}
	b.SetBytes(int64(size / len(evs)))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := m.Map(&evs[i%len(evs)], row); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkScanOrder is the scan alone of BenchmarkMapOrder: the body's
// validation and the search of the column's values.
func BenchmarkScanOrder(b *testing.B) {
	m, err := Compile(mustColumns(b, "order_id|$.order_id", "customer|$.customer.id", "amount|$.amount|double",
		"currency|$.currency", "created_at|$.created_at|timestamp"))
	if err != nil {
		b.Fatal(err)
	}
	evs := demoOrders(1024)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		r, err := m.Rows(&evs[i%len(evs)])
		if err != nil {
			b.Fatal(err)
		}
		r.Close()
		i++
	}
}

// demoOrders returns n events of partition 3 carrying orders as the demo
// producer marshals them.
func demoOrders(n int) []sinks.Event {
	rnd := rand.New(rand.NewPCG(1, 2))
	base := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	currencies := [...]string{"EUR", "USD", "GBP", "CHF"}
	evs := make([]sinks.Event, n)
	for i := range evs {
		c := rnd.IntN(50)
		var items []string
		amount := 0.0
		for k := 1 + rnd.IntN(2); k > 0; k-- {
			qty, price := 1+rnd.IntN(5), float64(100+rnd.IntN(9900))/100
			items = append(items, fmt.Sprintf(`{"sku":"SKU-%04d","qty":%d,"price":%s}`, rnd.IntN(10000), qty, strconv.FormatFloat(price, 'f', -1, 64)))
			amount += float64(qty) * price
		}
		amount = float64(int64(amount*100+0.5)) / 100
		created, _ := base.Add(time.Duration(i) * time.Millisecond).MarshalJSON()
		body := fmt.Sprintf(`{"order_id":"o-3-%09d","customer":{"id":"c-%03d","name":"Customer %d"},"amount":%s,"currency":%q,"items":[%s],"created_at":%s,"seq":%d}`,
			i, c, c, strconv.FormatFloat(amount, 'f', -1, 64), currencies[rnd.IntN(len(currencies))], strings.Join(items, ","), created, i+1)
		evs[i] = sinks.Event{Partition: "3", SequenceNumber: int64(i), EnqueuedTime: base.Add(time.Duration(i/100) * time.Millisecond), Body: []byte(body)}
	}
	return evs
}
