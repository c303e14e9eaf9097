package schemaregistry

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ehsink/ehsink/internal/avro"
	"github.com/ehsink/ehsink/internal/table/mapping"
	"github.com/ehsink/ehsink/sinks"
)

// benchSchema is the demo order (package produce) in Avro, as
// `make bench-e2e-avro` sends it.
const benchSchema = `{"type":"record","name":"Order","namespace":"demo","fields":[
 {"name":"order_id","type":"string"},
 {"name":"customer","type":{"type":"record","name":"Customer","fields":[{"name":"id","type":"string"},{"name":"name","type":"string"}]}},
 {"name":"amount","type":"double"},
 {"name":"currency","type":"string"},
 {"name":"items","type":{"type":"array","items":{"type":"record","name":"Item","fields":[
   {"name":"sku","type":"string"},{"name":"qty","type":"int"},{"name":"price","type":"double"}]}}},
 {"name":"created_at","type":{"type":"long","logicalType":"timestamp-micros"}},
 {"name":"seq","type":"int"}]}`

type staticRegistry map[string]string

func (s staticRegistry) Schema(_ context.Context, id string) (string, error) {
	if t, ok := s[id]; ok {
		return t, nil
	}
	return "", ErrUnknownSchema
}

// benchOrders returns n demo orders as JSON events and the same as Avro
// events (content type avro/binary+1).
func benchOrders(b *testing.B, n int) (jsonEvs, avroEvs []sinks.Event) {
	schema, err := avro.ParseSchema(benchSchema)
	if err != nil {
		b.Fatal(err)
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	base := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	ct := "avro/binary+1"
	for i := range n {
		c := rnd.IntN(50)
		body := fmt.Sprintf(`{"order_id":"o-3-%09d","customer":{"id":"c-%03d","name":"Customer %d"},"amount":%.2f,"currency":"EUR","items":[{"sku":"SKU-%04d","qty":%d,"price":%.2f}],"created_at":%q,"seq":%d}`,
			i, c, c, float64(rnd.IntN(100000))/100, rnd.IntN(10000), 1+rnd.IntN(5), float64(100+rnd.IntN(9900))/100,
			base.Add(time.Duration(i)*time.Millisecond).Format(time.RFC3339Nano), i+1)
		enc, err := avro.Encode(schema, []byte(body))
		if err != nil {
			b.Fatal(err)
		}
		ev := sinks.Event{Partition: "3", SequenceNumber: int64(i), EnqueuedTime: base, Body: []byte(body)}
		jsonEvs = append(jsonEvs, ev)
		ev.Body, ev.ContentType = enc, &ct
		avroEvs = append(avroEvs, ev)
	}
	return jsonEvs, avroEvs
}

func benchMapper(b *testing.B) *mapping.Mapper {
	var cols mapping.Columns
	for _, c := range [][3]string{
		{"order_id", "$.order_id", "string"}, {"customer", "$.customer.id", "string"}, {"amount", "$.amount", "double"},
		{"currency", "$.currency", "string"}, {"created_at", "$.created_at", "timestamp"}, {"partition", "@partition", "string"},
		{"seq", "@sequence_number", "int64"}, {"enqueued_at", "@enqueued_time", "timestamp"},
	} {
		col, err := mapping.NewColumn(c[0], c[1], c[2])
		if err != nil {
			b.Fatal(err)
		}
		cols = append(cols, col)
	}
	m, err := mapping.Compile(cols)
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// BenchmarkMapJSON is the baseline: the demo orders' JSON mapped by the
// columns of `make bench-e2e`.
func BenchmarkMapJSON(b *testing.B) {
	evs, _ := benchOrders(b, 1024)
	m := benchMapper(b)
	row := make([]any, 8)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := m.Map(&evs[i%len(evs)], row); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkDecodeMapAvro is the same orders as Avro: the decoder's path
// (schema id, cache, Avro to JSON into a reused buffer) and then the same
// mapping, as the runner does it per event.
func BenchmarkDecodeMapAvro(b *testing.B) {
	_, evs := benchOrders(b, 1024)
	m := benchMapper(b)
	d, err := NewDecoder(Options{Registry: staticRegistry{"1": benchSchema}, Framing: FramingAzure})
	if err != nil {
		b.Fatal(err)
	}
	row := make([]any, 8)
	var buf []byte
	ctx := context.Background()
	var ev sinks.Event // one, not one per event: the runner decodes in place
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		ev = evs[i%len(evs)]
		out, err := d.AppendJSON(ctx, ev.ContentType, ev.Body, buf[:0])
		if err != nil {
			b.Fatal(err)
		}
		buf, ev.Body = out, out
		if err := m.Map(&ev, row); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
