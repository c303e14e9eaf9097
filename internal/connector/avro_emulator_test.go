package connector_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/cli/devenv"
	"github.com/ehsink/ehsink/emulator"
	"github.com/ehsink/ehsink/internal/avro"
	"github.com/ehsink/ehsink/internal/connector"
	"github.com/ehsink/ehsink/internal/schemaregistry"
	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/sinks/sinktest"
)

// capturingDevEnv is devenv's, handing the emulator it starts to the test.
type capturingDevEnv struct{ started chan *emulator.Server }

func (c capturingDevEnv) StartEmulator(ctx context.Context, spec connector.EmulatorSpec, log *slog.Logger) (connector.Emulator, error) {
	emu, err := devenv.New().StartEmulator(ctx, spec, log)
	if err == nil {
		c.started <- emu.(*emulator.Server)
	}
	return emu, err
}

// emulatorOf waits for the emulator dev started for the run whose result
// comes on done (failing the test when Run returns first), and returns it
// with an HTTP client that trusts its certificate, for its schema registry.
func emulatorOf(t *testing.T, dev capturingDevEnv, done <-chan error) (*emulator.Server, *http.Client) {
	t.Helper()
	var srv *emulator.Server
	select {
	case srv = <-dev.started:
	case err := <-done:
		t.Fatalf("Run: %v", err)
	}
	hc, err := schemaregistry.HTTPClient(srv.CertificatePEM())
	if err != nil {
		t.Fatal(err)
	}
	return srv, hc
}

// TestEmulatorRegistryWiring: a connector with `connection: emulator` and
// `registry: {type: azure}`, nothing else set, finds the built-in
// emulator's registry (started for it) and trusts its certificate.
func TestEmulatorRegistryWiring(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	mem := sinktest.NewMemory()
	var reg sinks.Registry
	reg.Register("memory", mem.Driver())
	cfg := &connector.Config{
		DrainTimeout: 5 * time.Second,
		Emulator:     &connector.EmulatorSpec{Hubs: map[string]int{"avro": 1}},
		Connectors: []connector.Spec{{
			Name:       "avro",
			Source:     connector.SourceSpec{Connection: "emulator", EventHub: "avro", Format: "avro", Registry: &connector.RegistrySpec{Type: "azure"}},
			Checkpoint: connector.CheckpointSpec{File: &connector.FileCheckpointSpec{Dir: filepath.Join(dir, "checkpoints")}},
			Sink:       connector.SinkSpec{Type: "memory"},
			Errors:     connector.ErrorsSpec{DeadLetter: connector.DeadLetterSpec{Dir: filepath.Join(dir, "dead")}},
		}},
	}
	dev := capturingDevEnv{started: make(chan *emulator.Server, 1)}
	done, stop := runInBackground(ctx, cfg, connector.RunOptions{Registry: &reg, DevEnv: dev})
	defer func() {
		stop()
		select { // Run writes into dir until it returns (unless it has)
		case <-done:
		case <-time.After(30 * time.Second):
		}
	}()
	srv, hc := emulatorOf(t, dev, done)
	if srv.SchemaRegistryAddr() == "" {
		t.Fatal("the emulator serves no schema registry for a connector that reads one")
	}
	client, err := schemaregistry.NewAzure(srv.SchemaRegistryAddr(), nil, hc)
	if err != nil {
		t.Fatal(err)
	}
	const schema = `{"type":"record","name":"Ping","fields":[{"name":"n","type":"int"}]}`
	id, err := client.Register(ctx, "g", "Ping", schema)
	if err != nil {
		t.Fatal(err)
	}
	parsed, _ := avro.ParseSchema(schema)
	producer, err := azeventhubs.NewProducerClientFromConnectionString(srv.ConnectionString("avro"), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close(context.WithoutCancel(ctx))
	batch, err := producer.NewEventDataBatch(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	ct := schemaregistry.AzureContentTypePrefix + id
	for i := range 3 {
		body, err := avro.Encode(parsed, fmt.Appendf(nil, `{"n":%d}`, i))
		if err != nil {
			t.Fatal(err)
		}
		if err := batch.AddEventData(&azeventhubs.EventData{Body: body, ContentType: &ct}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := producer.SendEventDataBatch(ctx, batch, nil); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, ctx, done, "the 3 events committed", func() bool { return len(mem.Committed("0")) == 3 })
	for i, ev := range mem.Events("0") {
		if want := fmt.Sprintf(`{"n":%d}`, i); string(ev.Body) != want {
			t.Errorf("event %d: %s, want %s", i, ev.Body, want)
		}
	}
}
