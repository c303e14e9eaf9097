package js_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ehsink/ehsink/emulator"
	"github.com/ehsink/ehsink/emulator/emulatortest"
	"github.com/ehsink/ehsink/internal/secret"
)

// schemaRegistryPinned are the npm packages schemaregistry/registry.test.js
// needs, at the versions test/scripts/install-tools.sh installs.
var schemaRegistryPinned = map[string]string{
	"@azure/event-hubs":                  "6.0.4",
	"@azure/schema-registry":             "1.3.0",
	"@azure/schema-registry-avro":        "1.1.0",
	"@kafkajs/confluent-schema-registry": "4.1.0",
}

// TestJavaScriptSchemaRegistry runs schemaregistry/registry.test.js: the
// JavaScript Schema Registry client and its Avro serializer, and kafkajs'
// Confluent client, against an emulator with keys (so every registry call
// carries a SAS token that is verified), its schema registry over HTTPS
// (the certificate trusted through NODE_EXTRA_CA_CERTS) and Confluent basic
// auth; the serialized events go through the emulator's Event Hubs.
func TestJavaScriptSchemaRegistry(t *testing.T) {
	node, modules := nodeAndModules(t, schemaRegistryPinned)
	const hub = "js-schemas"
	srv := emulatortest.Start(t, emulator.Config{
		Hubs:                    []emulator.HubConfig{{Name: hub, Partitions: 2}},
		Keys:                    map[string]secret.String{"root": "cm9vdC1rZXk="},
		Policies:                []emulator.Policy{{Name: "reader", Key: "cmVhZGVyLWtleQ==", Rights: emulator.RightListen}},
		SchemaRegistryAddr:      "127.0.0.1:0",
		SchemaRegistryBasicAuth: "kafka:c29tZS1wYXNzd29yZA",
	})
	ca := filepath.Join(t.TempDir(), "emulator-ca.pem")
	if err := os.WriteFile(ca, srv.CertificatePEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(),
		"NODE_PATH="+modules,
		"NODE_EXTRA_CA_CERTS="+ca,
		"EH_CONNECTION_STRING="+namespaceConnectionString(srv),
		"SR_ENDPOINT=https://"+srv.SchemaRegistryAddr(),
		"SR_HUB="+hub,
		"SR_KEY_NAME=root", "SR_KEY=cm9vdC1rZXk=",
		"SR_LISTEN_KEY_NAME=reader", "SR_LISTEN_KEY=cmVhZGVyLWtleQ==",
		"CONFLUENT_USER=kafka", "CONFLUENT_PASSWORD=c29tZS1wYXNzd29yZA",
	)
	ctx, cancel := context.WithTimeout(t.Context(), suiteTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", "--test-reporter=spec", filepath.Join("schemaregistry", "registry.test.js"))
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatalf("node --test schemaregistry/registry.test.js: %v", err)
	}
	if !strings.Contains(out.String(), "pass 3") {
		t.Fatalf("node did not report 3 passing tests")
	}
}
