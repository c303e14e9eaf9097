package python

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/checkpoint"
	"github.com/ehsink/ehsink/emulator"
	"github.com/ehsink/ehsink/internal/secret"
	"github.com/ehsink/ehsink/internal/testenv"
)

const (
	python      = "/usr/bin/python3"
	installHint = "run `make tools` (test/scripts/install-python.sh installs Debian's python3-azure)"
	// amqpsPort is the only port azure-eventhub 5.11 dials: it drops the
	// endpoint's port. Several emulators share it on distinct loopback
	// addresses.
	amqpsPort = 5671
	key       = "cHl0aG9uLWNvbmZvcm1hbmNl"
	// suiteTimeout bounds one module's run; it is a deadline for hangs.
	suiteTimeout = 5 * time.Minute
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.StopSharedAzurite()
	os.Exit(code)
}

// hubs are the event hubs the Python modules use, one or more each.
var hubs = []emulator.HubConfig{
	{Name: "props", Partitions: 4},
	{Name: "sendkeys", Partitions: 4},
	{Name: "sendparts", Partitions: 4},
	{Name: "sendprops", Partitions: 4},
	{Name: "positions", Partitions: 1},
	{Name: "latest", Partitions: 1},
	{Name: "steal", Partitions: 1},
	{Name: "auth", Partitions: 2},
	{Name: "refresh", Partitions: 1},
	{Name: "balance", Partitions: 4},
	{Name: "ehsinkckpt", Partitions: 2},
}

// requirePython skips (or, under CI=true, fails) when the system python
// lacks the SDK.
func requirePython(t *testing.T) {
	t.Helper()
	out, err := exec.Command(python, "-c", "import azure.eventhub, azure.eventhub.extensions.checkpointstoreblob; print(azure.eventhub.__version__)").CombinedOutput()
	if err == nil {
		t.Logf("azure-eventhub %s on %s", strings.TrimSpace(string(out)), python)
		return
	}
	msg := fmt.Sprintf("%s cannot import azure.eventhub and its blob checkpoint store (%v: %s): %s", python, err, bytes.TrimSpace(out), installHint)
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true, so this is a failure: %s", msg)
	}
	t.Skip(msg)
}

// startEmulator starts the emulator with an AMQPS listener on port 5671
// of a random loopback address (127.0.0.1 is left to anything else using
// the port) and two policies: "root" with all rights and "reader" with
// Listen only. The test fails if the emulator closed a connection on a
// protocol error.
func startEmulator(t *testing.T, log *slog.Logger) *emulator.Server {
	t.Helper()
	certOut := filepath.Join(t.TempDir(), "emulator-ca.pem")
	for attempt := 0; ; attempt++ {
		ip := net.IPv4(127, byte(1+rand.IntN(250)), byte(rand.IntN(256)), byte(1+rand.IntN(250)))
		srv, err := emulator.Start(context.Background(), emulator.Config{
			Hubs: hubs,
			Policies: []emulator.Policy{
				{Name: "root", Key: secret.String(key)},
				{Name: "reader", Key: secret.String(key), Rights: emulator.RightListen},
			},
			TLS:    &emulator.TLSOptions{Addr: net.JoinHostPort(ip.String(), fmt.Sprint(amqpsPort)), CertOut: certOut},
			Logger: log,
		})
		if errors.Is(err, syscall.EADDRINUSE) && attempt < 20 {
			continue
		}
		if err != nil {
			t.Fatalf("start the emulator: %v", err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := srv.Shutdown(ctx); err != nil {
				t.Errorf("emulator shutdown: %v", err)
			}
			if n, errs := srv.ProtocolErrors(); n > 0 {
				t.Errorf("the emulator closed %d connection(s) on protocol errors: %q", n, errs)
			}
		})
		return srv
	}
}

// ehsinkCheckpoints sends events to hub "ehsinkckpt" and writes
// checkpoints for them with ehsink's Blob store (lowercased names, as
// ehsink writes them) under the namespace the Python SDK derives from the
// AMQPS endpoint. It returns what the Python module expects to read.
func ehsinkCheckpoints(t *testing.T, srv *emulator.Server, storage, container, namespace string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const hubName = "ehsinkckpt"
	events := map[string]int{"0": 10, "1": 4}
	at := map[string]int64{"0": 4, "1": 1} // checkpointed sequence numbers
	p, err := azeventhubs.NewProducerClientFromConnectionString(srv.ConnectionString(hubName), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	c, err := azeventhubs.NewConsumerClientFromConnectionString(srv.ConnectionString(hubName), "", azeventhubs.DefaultConsumerGroup, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	blob, err := checkpoint.NewBlobStore(ctx, checkpoint.BlobOptions{Connection: secret.String(storage), Container: container})
	if err != nil {
		t.Fatal(err)
	}
	store := checkpoint.Lowercase(blob, nil)
	type cp struct {
		Offset         string `json:"offset"`
		SequenceNumber int64  `json:"sequence_number"`
	}
	want := map[string]cp{}
	for partition, n := range events {
		batch, err := p.NewEventDataBatch(ctx, &azeventhubs.EventDataBatchOptions{PartitionID: &partition})
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if err := batch.AddEventData(&azeventhubs.EventData{Body: fmt.Appendf(nil, "ehsink-%s-%d", partition, i)}, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.SendEventDataBatch(ctx, batch, nil); err != nil {
			t.Fatal(err)
		}
		pc, err := c.NewPartitionClient(partition, &azeventhubs.PartitionClientOptions{StartPosition: azeventhubs.StartPosition{SequenceNumber: ptr(at[partition]), Inclusive: true}})
		if err != nil {
			t.Fatal(err)
		}
		evs, err := pc.ReceiveEvents(ctx, 1, nil)
		pc.Close(context.Background())
		if err != nil || len(evs) != 1 || evs[0].SequenceNumber != at[partition] {
			t.Fatalf("read back event %d of partition %s: %v, %v", at[partition], partition, evs, err)
		}
		offset := fmt.Sprint(evs[0].Offset)
		if err := store.SetCheckpoint(ctx, azeventhubs.Checkpoint{
			ConsumerGroup:           azeventhubs.DefaultConsumerGroup,
			EventHubName:            hubName,
			FullyQualifiedNamespace: namespace,
			PartitionID:             partition,
			Offset:                  &offset,
			SequenceNumber:          ptr(at[partition]),
		}, nil); err != nil {
			t.Fatal(err)
		}
		want[partition] = cp{Offset: offset, SequenceNumber: at[partition]}
	}
	b, err := json.Marshal(map[string]any{"eventhub": hubName, "container_suffix": "ehsink", "checkpoints": want, "events": events})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func ptr[T any](v T) *T { return &v }

// TestPythonSDK runs every test_*.py module of the suite, each as a
// subtest in its own python process, against one emulator and Azurite.
// A module fails the subtest through its exit status.
func TestPythonSDK(t *testing.T) {
	requirePython(t)
	azurite := testenv.Azurite(t)
	var log *slog.Logger
	if os.Getenv("EMULATOR_TEST_LOG") != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	srv := startEmulator(t, log)
	namespace := srv.TLSAddr()
	containerPrefix := azurite.ContainerName(t)
	certOut := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(certOut, srv.CertificatePEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	ckpts := ehsinkCheckpoints(t, srv, azurite.ConnectionString(), containerPrefix+"-ehsink", namespace)
	env := append(os.Environ(),
		"PYTHONDONTWRITEBYTECODE=1",
		"EHSINK_PY_NAMESPACE="+namespace,
		"EHSINK_PY_CA="+certOut,
		"EHSINK_PY_KEY_NAME=root",
		"EHSINK_PY_KEY="+key,
		"EHSINK_PY_LISTEN_KEY_NAME=reader",
		"EHSINK_PY_STORAGE="+azurite.ConnectionString(),
		"EHSINK_PY_CONTAINER="+containerPrefix,
		"EHSINK_PY_EHSINK_CHECKPOINTS="+string(ckpts),
	)
	modules, err := filepath.Glob("test_*.py")
	if err != nil || len(modules) == 0 {
		t.Fatalf("no test_*.py modules found: %v", err)
	}
	t.Run("modules", func(t *testing.T) {
		for _, m := range modules {
			name := strings.TrimSuffix(m, ".py")
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				ctx, cancel := context.WithTimeout(context.Background(), suiteTimeout)
				defer cancel()
				cmd := exec.CommandContext(ctx, python, "-m", "unittest", "-v", name)
				cmd.Env = env
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("python -m unittest %s: %v\n%s", name, err, out)
				}
				t.Logf("%s", out)
			})
		}
	})
}
