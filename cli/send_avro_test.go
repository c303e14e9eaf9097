package cli

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"

	"github.com/ehsink/ehsink/emulator"
	"github.com/ehsink/ehsink/emulator/emulatortest"
	"github.com/ehsink/ehsink/internal/schemaregistry"
	"github.com/ehsink/ehsink/internal/secret"
)

// TestSendAvro: `send --avro` registers the schema and sends each line as
// Avro, with Azure's content type or Confluent's framing; the bodies are
// read back by hamba/avro's own decoder with the schema the registry
// holds under the id the event names.
func TestSendAvro(t *testing.T) {
	srv := emulatortest.Start(t, emulator.Config{
		Hubs:                    []emulator.HubConfig{{Name: "orders", Partitions: 1}},
		Keys:                    map[string]secret.String{"root": "cm9vdC1rZXk="},
		SchemaRegistryAddr:      "127.0.0.1:0",
		SchemaRegistryBasicAuth: "u:pw",
	})
	dir := t.TempDir()
	schemaFile, lines, ca := filepath.Join(dir, "order.avsc"), filepath.Join(dir, "orders.jsonl"), filepath.Join(dir, "ca.pem")
	const schema = `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"long"},
		{"name":"at","type":{"type":"long","logicalType":"timestamp-millis"}},{"name":"note","type":["null","string"],"default":null}]}`
	for name, text := range map[string]string{schemaFile: schema, ca: string(srv.CertificatePEM()),
		lines: `{"id":1,"at":"2026-01-02T03:04:05.006Z","note":"hi"}` + "\n" + `{"id":2,"at":1767323045006}` + "\n"} {
		if err := os.WriteFile(name, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	registry := "https://" + srv.SchemaRegistryAddr()
	conn := srv.ConnectionString("orders")
	if code, _, stderr := callSend(t, "--connection", conn, "--file", lines, "--avro", schemaFile, "--registry", registry, "--registry-ca", ca, "--schema-group", "shop"); code != exitOK {
		t.Fatalf("send --avro: exit %d: %s", code, stderr)
	}
	t.Setenv("EHSINK_REGISTRY_PASSWORD", "pw")
	if code, _, stderr := callSend(t, "--connection", conn, "--file", lines, "--avro", schemaFile, "--confluent", "--registry", registry, "--registry-ca", ca, "--registry-user", "u"); code != exitOK {
		t.Fatalf("send --avro --confluent: exit %d: %s", code, stderr)
	}
	hc, err := schemaregistry.HTTPClient(srv.CertificatePEM())
	if err != nil {
		t.Fatal(err)
	}
	az, _ := schemaregistry.NewAzure(registry, schemaregistry.SASToken(registry, "root", "cm9vdC1rZXk="), hc)
	cf, _ := schemaregistry.NewConfluent(registry, "u", "pw", hc)
	events := readAll(t, conn)["0"]
	if len(events) != 4 {
		t.Fatalf("%d events, want 4", len(events))
	}
	for i, ev := range events {
		var (
			text string
			body = ev.Body
		)
		if i < 2 {
			if ev.ContentType == nil || !strings.HasPrefix(*ev.ContentType, "avro/binary+") {
				t.Fatalf("event %d: content type %v, want avro/binary+ID", i, ev.ContentType)
			}
			text, err = az.Schema(t.Context(), strings.TrimPrefix(*ev.ContentType, "avro/binary+"))
		} else {
			if len(body) < 5 || body[0] != 0 {
				t.Fatalf("event %d: body %x, not Confluent-framed", i, body)
			}
			text, err = cf.Schema(t.Context(), strconv.Itoa(int(binary.BigEndian.Uint32(body[1:5]))))
			body = body[5:]
		}
		if err != nil {
			t.Fatalf("event %d: the registry has no schema for its id: %v", i, err)
		}
		var got struct {
			ID   int64     `avro:"id"`
			At   time.Time `avro:"at"`
			Note *string   `avro:"note"`
		}
		if err := avro.Unmarshal(avro.MustParse(text), body, &got); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		wantNote := i%2 == 0
		if got.ID != int64(i%2+1) || !got.At.Equal(time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.UTC)) || (got.Note != nil) != wantNote {
			t.Errorf("event %d: %+v", i, got)
		}
	}
	for _, args := range [][]string{
		{"--avro", schemaFile, "--demo"},
		{"--avro", schemaFile, "--content-type", "x"},
		{"--confluent"},
		{"--avro", schemaFile, "--subject", "s"},
	} {
		if code, _, _ := callSend(t, append([]string{"--connection", conn}, args...)...); code != exitUsage {
			t.Errorf("send %q: exit %d, want %d", args, code, exitUsage)
		}
	}
	if code, _, stderr := callSend(t, "--connection", conn, "--body", `{"id":"x"}`, "--avro", schemaFile, "--registry", registry, "--registry-ca", ca, "--schema-group", "shop"); code != exitFailure || !strings.Contains(stderr, "$.id") {
		t.Errorf("a line that does not fit the schema: exit %d, %s", code, stderr)
	}
}
