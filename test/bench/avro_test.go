//go:build linux

package e2e

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/internal/avro"
	"github.com/ehsink/ehsink/internal/schemaregistry"
	"github.com/ehsink/ehsink/internal/testenv"
	"github.com/ehsink/ehsink/source"
)

// OrderSchema is the Avro schema of the demo orders (produce.Order):
// the same records as the JSON backlog, created_at a timestamp-micros.
const OrderSchema = `{"type":"record","name":"Order","namespace":"demo","fields":[
 {"name":"order_id","type":"string"},
 {"name":"customer","type":{"type":"record","name":"Customer","fields":[{"name":"id","type":"string"},{"name":"name","type":"string"}]}},
 {"name":"amount","type":"double"},
 {"name":"currency","type":"string"},
 {"name":"items","type":{"type":"array","items":{"type":"record","name":"Item","fields":[
   {"name":"sku","type":"string"},{"name":"qty","type":"int"},{"name":"price","type":"double"}]}}},
 {"name":"created_at","type":{"type":"long","logicalType":"timestamp-micros"}},
 {"name":"seq","type":"int"}]}`

// BenchmarkE2EAvro is `make bench-e2e-avro`: the same orders as
// BenchmarkE2E's backlog in two hubs of one emulator, as JSON and as
// Avro (Azure Schema Registry's content type, the schema in the
// emulator's registry), each drained raw (median of DRAINS) and run by
// ehsink into PostgreSQL append at defaults. The figure is each run's
// rate over the raw drain of its own hub, measured in the same run.
func BenchmarkE2EAvro(b *testing.B) {
	if b.N != 1 {
		b.Fatalf("b.N = %d: run with -benchtime 1x", b.N)
	}
	per := (envInt(b, "EVENTS", defaultEvents) + partitions - 1) / partitions
	events := per * partitions
	drains := envInt(b, "DRAINS", defaultDrains)
	load := loadAverage()
	bin := buildEhsink(b)
	pg := testenv.Postgres(b)
	pm := postmasterPID(b, pg.DSN())
	dir := b.TempDir()
	ca := filepath.Join(dir, "emulator-ca.pem")
	regAddr := freeAddr(b)
	emu := startChild(b, nil, bin, "emulator", "--listen", "127.0.0.1:0", "--log-level", "warn",
		"--hub", "json="+strconv.Itoa(partitions), "--hub", "avro="+strconv.Itoa(partitions),
		"--schema-registry", regAddr, "--tls-cert-out", ca)
	var conns [2]string
	for i, h := range []string{"json", "avro"} {
		if conns[i] = emu.line(b); !strings.Contains(conns[i], "EntityPath="+h) {
			b.Fatalf("emulator line %d is %q, want the connection string of hub %s", i+1, conns[i], h)
		}
	}
	registry := "https://" + regAddr
	jsonBytes := loadBacklog(b, conns[0], per)
	avroBytes := loadAvroBacklog(b, conns[1], registry, ca, per)
	b.Logf("backlog: %d events per hub, %d B of JSON, %d B of Avro each on average", events, jsonBytes/int64(events), avroBytes/int64(events))

	defConns := source.Settings{}.ConnectionsFor(partitions)
	type hub struct {
		name, conn, source string
		last               map[string]int64
		drain, run         result
		raws               []result
	}
	hubs := []*hub{
		{name: "JSON", conn: conns[0]},
		{name: "Avro", conn: conns[1], source: fmt.Sprintf("format: avro, registry: {type: azure, url: %q, ca_file: %q}", registry, ca)},
	}
	for _, h := range hubs {
		h.last = lastSequences(b, h.conn)
		counts := map[string]int64{}
		for id, seq := range h.last {
			counts[id] = seq + 1
		}
		for range drains {
			h.raws = append(h.raws, rawDrain(b, h.conn, counts, events, defConns))
			b.Logf("raw drain of the %s hub: %.0f events/s", h.name, h.raws[len(h.raws)-1].rate())
		}
		h.drain = slices.SortedFunc(slices.Values(h.raws), func(x, y result) int { return cmp.Compare(x.elapsed, y.elapsed) })[len(h.raws)/2]
	}
	for _, h := range hubs {
		dsn := pg.NewDatabase(b)
		sink := fmt.Sprintf("type: postgres\n      dsn: %q\n      table: orders\n      mode: append\n      create_table: true\n      columns:%s", dsn, columnsYAML)
		h.run = runEhsink(b, bin, "-"+strings.ToLower(h.name), h.conn, h.source, "", h.last, sink, pm, events)
		if n := countRows(b, dsn, "orders"); n != events {
			b.Fatalf("%s: the table holds %d rows, want %d", h.name, n, events)
		}
		b.Logf("ehsink %s → PostgreSQL append: %.0f events/s", h.name, h.run.rate())
	}
	cpuPer := func(r result) float64 { return float64(r.cpu.Microseconds()) / float64(r.events) }
	out := &strings.Builder{}
	fmt.Fprintf(out, "\nbench-e2e-avro, %s: %d events per hub, %d B of JSON or %d B of Avro on average, %s, load average at start %s\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), events, jsonBytes/int64(events), avroBytes/int64(events), machine(), load)
	fmt.Fprintln(out, "| run | events/s | ÷ raw drain of its hub | CPU µs/event | peak RSS |")
	fmt.Fprintln(out, "|---|---:|---:|---:|---:|")
	for _, h := range hubs {
		fmt.Fprintf(out, "| raw SDK drain of the %s hub over %d connections (median of %d) | %.0f | 1 | %.1f | %s |\n",
			h.name, defConns, drains, h.drain.rate(), cpuPer(h.drain), mib(h.drain.peakRSS))
	}
	for _, h := range hubs {
		fmt.Fprintf(out, "| ehsink run, %s → PostgreSQL append | %.0f | %.2f | %.1f | %s |\n",
			h.name, h.run.rate(), h.run.rate()/h.drain.rate(), cpuPer(h.run), mib(h.run.peakRSS))
	}
	fmt.Print(out.String())
}

// loadAvroBacklog registers OrderSchema in the registry and sends the
// orders of loadBacklog, Avro-encoded with Azure's content type, to each
// partition. It returns the bytes of the bodies sent.
func loadAvroBacklog(b *testing.B, conn, registry, caFile string, per int) int64 {
	b.Helper()
	ctx := context.Background()
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		b.Fatal(err)
	}
	hc, err := schemaregistry.HTTPClient(caPEM)
	if err != nil {
		b.Fatal(err)
	}
	client, err := schemaregistry.NewAzure(registry, nil, hc)
	if err != nil {
		b.Fatal(err)
	}
	id, err := client.Register(ctx, "bench", "demo.Order", OrderSchema)
	if err != nil {
		b.Fatal(err)
	}
	schema, err := avro.ParseSchema(OrderSchema)
	if err != nil {
		b.Fatal(err)
	}
	producer, err := azeventhubs.NewProducerClientFromConnectionString(conn, "", nil)
	if err != nil {
		b.Fatal(err)
	}
	defer producer.Close(ctx)
	ct := schemaregistry.AzureContentTypePrefix + id
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		errs  []error
		total int64
	)
	for p := range partitions {
		wg.Go(func() {
			n, err := sendEncoded(ctx, producer, p, per, &ct, func(i int) ([]byte, error) {
				j, err := json.Marshal(order(p, i))
				if err != nil {
					return nil, err
				}
				return avro.Encode(schema, j)
			})
			mu.Lock()
			defer mu.Unlock()
			total += n
			errs = append(errs, err)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		b.Fatal(err)
	}
	return total
}

// sendEncoded sends n bodies made by body to partition p in full batches.
func sendEncoded(ctx context.Context, producer *azeventhubs.ProducerClient, p, n int, ct *string, body func(i int) ([]byte, error)) (int64, error) {
	id := strconv.Itoa(p)
	var sent int64
	for i := 0; i < n; {
		batch, err := producer.NewEventDataBatch(ctx, &azeventhubs.EventDataBatchOptions{PartitionID: &id})
		if err != nil {
			return sent, err
		}
		for ; i < n; i++ {
			data, err := body(i)
			if err != nil {
				return sent, err
			}
			if err := batch.AddEventData(&azeventhubs.EventData{Body: data, ContentType: ct}, nil); errors.Is(err, azeventhubs.ErrEventDataTooLarge) {
				break
			} else if err != nil {
				return sent, err
			}
			sent += int64(len(data))
		}
		if err := producer.SendEventDataBatch(ctx, batch, nil); err != nil {
			return sent, fmt.Errorf("partition %s: send: %w", id, err)
		}
	}
	return sent, nil
}
