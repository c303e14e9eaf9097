package connector

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ehsink/ehsink/internal/avro"
	"github.com/ehsink/ehsink/internal/config"
	"github.com/ehsink/ehsink/internal/schemaregistry"
	"github.com/ehsink/ehsink/internal/table/expr"
	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/sinks/sinktest"
)

const testUserSchema = `{"type":"record","name":"User","fields":[{"name":"id","type":"long"},{"name":"name","type":"string"},
	{"name":"at","type":{"type":"long","logicalType":"timestamp-millis"}}]}`

// TestRunnerDecodesAvro: Avro events reach the sink as the JSON of their
// records (bodies decoded into the buffer the partition reuses must not
// bleed into each other across batches), poison events are dead letters
// with their reason and Avro body, a registry outage is waited out, and
// the checkpoint reaches the last event.
func TestRunnerDecodesAvro(t *testing.T) {
	var fails atomic.Int64
	fails.Store(3) // the first fetches meet an outage
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fails.Add(-1) >= 0 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		if r.URL.Path == "/$schemaGroups/$schemas/u1" {
			_, _ = w.Write([]byte(testUserSchema))
			return
		}
		http.Error(w, `{"error":{"code":"ItemNotFound","message":"no"}}`, http.StatusNotFound)
	}))
	defer srv.Close()
	client, err := schemaregistry.NewAzure(srv.URL, nil, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	dec, err := schemaregistry.NewDecoder(schemaregistry.Options{Registry: client, Framing: schemaregistry.FramingAzure})
	if err != nil {
		t.Fatal(err)
	}
	schema, _ := avro.ParseSchema(testUserSchema)
	const n = 120
	mem := sinktest.NewMemory()
	store := &memCheckpoints{pos: map[string]sinks.Position{}}
	// A bound on a hang (a poison event taken for an outage would wait
	// forever), not a speed assertion.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := newMemPartition("0", n, store, rand.New(rand.NewPCG(7, 8)), cancel)
	good := "avro/binary+u1"
	unknown := "avro/binary+nope"
	poison := map[int64]string{}
	for i := range p.log {
		ev := &p.log[i]
		seq := ev.SequenceNumber
		body, err := avro.Encode(schema, fmt.Appendf(nil, `{"id":%d,"name":"user %d %s","at":%d}`, seq, seq, strings.Repeat("x", int(seq%13)), 1700000000000+seq))
		if err != nil {
			t.Fatal(err)
		}
		ev.Body, ev.ContentType = body, &good
		switch {
		case seq%17 == 5:
			ev.ContentType = &unknown
			poison[seq] = "unknown schema id"
		case seq%19 == 6:
			ev.Body = body[:len(body)-3]
			poison[seq] = "invalid Avro body"
		case seq%23 == 7:
			ev.ContentType = nil
			poison[seq] = "no content type"
		case seq == 98:
			// A tombstone is handed on as it is: here the filter cannot
			// read it, as with a JSON connector.
			ev.Body = nil
			poison[seq] = "filter.drop"
		}
	}
	filter := &FilterSpec{Drop: expr.MustCompile(`$.id == 50`)}
	r, err := NewRunner(RunnerOptions{Connector: "a", Sink: mem, Decoder: dec, Filter: filter,
		Retry: RetrySpec{InitialBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.RunPartition(ctx, p); err != nil {
		t.Fatal(err)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatal("the partition did not get through its events")
	}
	events := mem.Events("0")
	want := 0
	for seq := range int64(n) {
		if _, bad := poison[seq]; !bad && seq != 50 {
			want++
		}
	}
	if len(events) != want {
		var got []int64
		for _, ev := range events {
			got = append(got, ev.SequenceNumber)
		}
		t.Fatalf("%d events committed, want %d: %v", len(events), want, got)
	}
	for _, ev := range events {
		seq := ev.SequenceNumber
		w := fmt.Sprintf(`{"id":%d,"name":"user %d %s","at":"%s"}`, seq, seq, strings.Repeat("x", int(seq%13)), time.UnixMilli(1700000000000+seq).UTC().Format("2006-01-02T15:04:05.000Z"))
		if string(ev.Body) != w {
			t.Fatalf("seq %d: body %s, want %s", seq, ev.Body, w)
		}
	}
	dead := mem.DeadLetters("0")
	if len(dead) != len(poison) {
		t.Fatalf("%d dead letters, want %d", len(dead), len(poison))
	}
	for _, d := range dead {
		if w := poison[d.Event.SequenceNumber]; !strings.Contains(d.Reason, w) {
			t.Errorf("seq %d: reason %q, want it to say %q", d.Event.SequenceNumber, d.Reason, w)
		}
		if len(d.Event.Body) > 0 && d.Event.Body[0] == '{' {
			t.Errorf("seq %d: dead letter holds JSON, want the Avro body as it came", d.Event.SequenceNumber)
		}
	}
	if pos, _ := store.get("0"); pos.SequenceNumber != n-1 {
		t.Fatalf("checkpoint at %d, want %d", pos.SequenceNumber, n-1)
	}
	if fails.Load() >= 0 {
		t.Fatal("the outage was never met")
	}
}

// TestRunnerWaitsForRegistry: while the registry is down the partition
// neither writes nor dead-letters; it ends only with its context.
func TestRunnerWaitsForRegistry(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusBadGateway)
	}))
	defer srv.Close()
	client, _ := schemaregistry.NewAzure(srv.URL, nil, srv.Client())
	dec, _ := schemaregistry.NewDecoder(schemaregistry.Options{Registry: client, Framing: schemaregistry.FramingAzure})
	mem := sinktest.NewMemory()
	store := &memCheckpoints{pos: map[string]sinks.Position{}}
	ctx, cancel := context.WithCancel(context.Background())
	p := newMemPartition("0", 5, store, rand.New(rand.NewPCG(1, 2)), func() {})
	ct := "avro/binary+u1"
	for i := range p.log {
		p.log[i].ContentType = &ct
	}
	beats := make(chan struct{}, 1)
	r, _ := NewRunner(RunnerOptions{Connector: "a", Sink: mem, Decoder: dec,
		Retry: RetrySpec{InitialBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}})
	done := make(chan error, 1)
	go func() { done <- r.RunPartition(ctx, &beatingPartition{memPartition: p, beats: beats}) }()
	for range 3 {
		select {
		case <-beats: // it waits, heartbeating
		case <-time.After(30 * time.Second): // a hang bound, not a speed assertion
			cancel()
			t.Fatal("no heartbeat while the partition waits for the registry")
		}
	}
	cancel()
	err := <-done
	if !errors.Is(err, context.Canceled) && err != nil {
		t.Fatalf("RunPartition: %v", err)
	}
	if got := mem.Committed("0"); len(got) != 0 {
		t.Fatalf("committed %v while the registry was down", got)
	}
	if d := mem.DeadLetters("0"); len(d) != 0 {
		t.Fatalf("%d dead letters while the registry was down, want none", len(d))
	}
}

type beatingPartition struct {
	*memPartition
	beats chan struct{}
}

func (b *beatingPartition) Heartbeat() {
	select {
	case b.beats <- struct{}{}:
	default:
	}
}

func TestValidateFormat(t *testing.T) {
	dir := t.TempDir()
	badSchema := filepath.Join(dir, "bad.avsc")
	if err := os.WriteFile(badSchema, []byte(`{"type":"record"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	base := func(src SourceSpec) *Config {
		if src.Connection == "" {
			src.Connection = "emulator"
		}
		return &Config{Emulator: &EmulatorSpec{}, Connectors: []Spec{{Name: "a", Source: src, Sink: SinkSpec{Type: "stdout"}}}}
	}
	for _, c := range []struct {
		src  SourceSpec
		want []string
	}{
		{SourceSpec{Format: "xml"}, []string{`connectors[0].source.format: "xml": want json or avro`}},
		{SourceSpec{Format: "avro"}, []string{"connectors[0].source.registry: required with format: avro"}},
		{SourceSpec{Registry: &RegistrySpec{Type: "azure"}}, []string{"connectors[0].source.registry: used only with format: avro"}},
		{SourceSpec{Format: "avro", Registry: &RegistrySpec{}}, []string{"connectors[0].source.registry.type: required"}},
		{SourceSpec{Format: "avro", Registry: &RegistrySpec{Type: "kafka"}}, []string{`connectors[0].source.registry.type: "kafka": want azure or confluent`}},
		{SourceSpec{Connection: "Endpoint=sb://x.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=dg==;EntityPath=h", Format: "avro", Registry: &RegistrySpec{Type: "confluent", Username: "u"}}, []string{
			"connectors[0].source.registry.url: required with type confluent", "connectors[0].source.registry.password: username and password go together"}},
		{SourceSpec{Format: "avro", Registry: &RegistrySpec{Type: "azure", Username: "u", URL: "ftp://x", CAFile: filepath.Join(dir, "none.pem"), ReaderSchema: badSchema, CacheSize: -1}}, []string{
			"connectors[0].source.registry.username: an azure registry uses the source's credentials",
			`connectors[0].source.registry.url: "ftp://x": want http(s)://HOST[:PORT]`,
			"connectors[0].source.registry.ca_file: open ", "connectors[0].source.registry.reader_schema: " + badSchema,
			"connectors[0].source.registry.cache_size: must not be negative"}},
	} {
		err := base(c.src).Validate()
		for _, w := range c.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: %v, want %q", c.src, err, w)
			}
		}
		var ce *config.Error
		if !errors.As(err, &ce) {
			t.Errorf("%+v: %v is no *config.Error", c.src, err)
		}
	}
	ok := base(SourceSpec{EventHub: "orders", Format: "avro", Registry: &RegistrySpec{Type: "azure"}})
	if err := ok.Validate(); err != nil {
		t.Fatalf("a valid avro source: %v", err)
	}
	if got := ok.withDefaults().Emulator.SchemaRegistry; got != "127.0.0.1:0" {
		t.Errorf("emulator.schema_registry = %q, want 127.0.0.1:0 for a connector reading the emulator's registry", got)
	}
}
