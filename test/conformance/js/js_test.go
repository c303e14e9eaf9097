// Package js_test runs the JavaScript conformance suite: the tests in this
// directory (*.test.js, an ordinary `node --test` suite) drive the
// JavaScript Event Hubs SDK (@azure/event-hubs, installed into .tools by
// test/scripts/install-tools.sh) against an in-process emulator over TCP, and
// its Blob checkpoint store against Azurite. Each *.test.js file is a
// subtest here, so `go test ./...` and `make test` run the suite. Without
// Node.js or the packages the test is skipped, or fails when CI=true.
package js_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/checkpoint"
	"github.com/ehsink/ehsink/emulator"
	"github.com/ehsink/ehsink/emulator/emulatortest"
	"github.com/ehsink/ehsink/internal/secret"
	"github.com/ehsink/ehsink/internal/testenv"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.StopSharedAzurite()
	os.Exit(code)
}

// pinned are the npm packages the suite needs, at the versions
// test/scripts/install-tools.sh installs.
var pinned = map[string]string{
	"@azure/event-hubs":                     "6.0.4",
	"@azure/eventhubs-checkpointstore-blob": "2.0.0",
	"@azure/storage-blob":                   "12.28.0",
}

// hubs are the event hubs the suite uses, one per file so files never see
// each other's events.
var hubs = []emulator.HubConfig{
	{Name: "js-props", Partitions: 3},
	{Name: "js-send", Partitions: 4},
	{Name: "js-positions", Partitions: 2},
	{Name: "js-epoch", Partitions: 1},
	{Name: "js-balance", Partitions: 4},
	{Name: "js-ehsink", Partitions: 2},
}

// suiteTimeout bounds one file's node process; a hang bound, not a speed
// assertion.
const suiteTimeout = 5 * time.Minute

func TestJavaScriptSDK(t *testing.T) {
	node, modules := nodeAndModules(t, pinned)
	srv := emulatortest.Start(t, emulator.Config{Hubs: hubs})
	az := testenv.Azurite(t)
	ehsinkContainer := az.ContainerName(t)
	cps := writeEhsinkCheckpoints(t, srv, az.ConnectionString(), ehsinkContainer)
	cpsJSON, err := json.Marshal(cps)
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(),
		"NODE_PATH="+modules,
		"EH_CONNECTION_STRING="+namespaceConnectionString(srv),
		"STORAGE_CONNECTION_STRING="+az.ConnectionString(),
		"EHSINK_CHECKPOINT_CONTAINER="+ehsinkContainer,
		"EHSINK_CHECKPOINTS="+string(cpsJSON),
		"JS_BALANCE_CONTAINER="+az.ContainerName(t),
	)
	files, err := filepath.Glob("*.test.js")
	if err != nil || len(files) == 0 {
		t.Fatalf("no *.test.js files in test/conformance/js: %v", err)
	}
	sort.Strings(files)
	for _, f := range files {
		t.Run(strings.TrimSuffix(f, ".test.js"), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), suiteTimeout)
			defer cancel()
			cmd := exec.CommandContext(ctx, node, "--test", "--test-reporter=spec", f)
			cmd.Env = env
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err := cmd.Run()
			t.Log("\n" + out.String())
			if err != nil {
				t.Fatalf("node --test %s: %v", f, err)
			}
		})
	}
}

// nodeAndModules finds node and the .tools/node_modules folder holding the
// packages at the versions of pins; it skips the test, or fails it when
// CI=true, if either is missing or a package is at another version.
func nodeAndModules(t *testing.T, pins map[string]string) (node, modules string) {
	t.Helper()
	missing := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...) + "; run make tools (test/scripts/install-tools.sh)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg + " (CI=true, so this is a failure)")
		}
		t.Skip(msg)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("node not found on PATH")
	}
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	modules = filepath.Join(root, ".tools", "node_modules")
	for pkg, version := range pins {
		b, err := os.ReadFile(filepath.Join(modules, filepath.FromSlash(pkg), "package.json"))
		if err != nil {
			missing("%s is not installed in %s", pkg, modules)
		}
		var meta struct{ Version string }
		if err := json.Unmarshal(b, &meta); err != nil || meta.Version != version {
			missing("%s is at version %q in %s, want %s", pkg, meta.Version, modules, version)
		}
	}
	return node, modules
}

// namespaceConnectionString is the emulator's connection string without
// EntityPath: the JavaScript clients take the hub name separately.
func namespaceConnectionString(srv *emulator.Server) string {
	var parts []string
	for _, p := range strings.Split(srv.ConnectionString("js-ehsink"), ";") {
		if !strings.HasPrefix(p, "EntityPath=") {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, ";")
}

type jsCheckpoint struct {
	SequenceNumber int64  `json:"sequenceNumber"`
	Offset         string `json:"offset"`
}

// writeEhsinkCheckpoints sends 10 events to each partition of js-ehsink
// and checkpoints event 4 of each through ehsink's checkpoint package (the
// Blob store wrapped as a connector wraps it), under the namespace the Go
// SDK derives from the emulator's connection string. It returns the
// checkpoints the JavaScript store must list.
func writeEhsinkCheckpoints(t *testing.T, srv *emulator.Server, storage, container string) map[string]jsCheckpoint {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	const hub, seq = "js-ehsink", int64(4)
	conn := srv.ConnectionString(hub)
	props, err := azeventhubs.ParseConnectionString(conn)
	if err != nil {
		t.Fatal(err)
	}
	producer, err := azeventhubs.NewProducerClientFromConnectionString(conn, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close(context.WithoutCancel(ctx))
	consumer, err := azeventhubs.NewConsumerClientFromConnectionString(conn, "", azeventhubs.DefaultConsumerGroup, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close(context.WithoutCancel(ctx))
	bs, err := checkpoint.NewBlobStore(ctx, checkpoint.BlobOptions{Connection: secret.String(storage), Container: container})
	if err != nil {
		t.Fatal(err)
	}
	store := checkpoint.Lowercase(bs, nil)

	out := map[string]jsCheckpoint{}
	for _, pid := range []string{"0", "1"} {
		batch, err := producer.NewEventDataBatch(ctx, &azeventhubs.EventDataBatchOptions{PartitionID: &pid})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 10 {
			if err := batch.AddEventData(&azeventhubs.EventData{Body: fmt.Appendf(nil, `{"n":%d}`, i)}, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := producer.SendEventDataBatch(ctx, batch, nil); err != nil {
			t.Fatal(err)
		}
		pc, err := consumer.NewPartitionClient(pid, &azeventhubs.PartitionClientOptions{
			StartPosition: azeventhubs.StartPosition{SequenceNumber: ptr(seq), Inclusive: true}})
		if err != nil {
			t.Fatal(err)
		}
		evs, err := pc.ReceiveEvents(ctx, 1, nil)
		pc.Close(context.WithoutCancel(ctx))
		if err != nil || len(evs) != 1 || evs[0].SequenceNumber != seq {
			t.Fatalf("reading event %d of partition %s: %v (%d events)", seq, pid, err, len(evs))
		}
		err = store.SetCheckpoint(ctx, azeventhubs.Checkpoint{
			FullyQualifiedNamespace: props.FullyQualifiedNamespace, EventHubName: hub, ConsumerGroup: azeventhubs.DefaultConsumerGroup,
			PartitionID: pid, SequenceNumber: ptr(seq), Offset: &evs[0].Offset,
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		out[pid] = jsCheckpoint{SequenceNumber: seq, Offset: evs[0].Offset}
	}
	return out
}

func ptr[T any](v T) *T { return &v }
