package e2e_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"

	"github.com/ehsink/ehsink/emulator"
	"github.com/ehsink/ehsink/emulator/emulatortest"
	"github.com/ehsink/ehsink/internal/produce"
	"github.com/ehsink/ehsink/internal/testenv"
)

// kedaTrigger is the metadata of a KEDA azure-eventhub trigger with
// checkpointStrategy: blobMetadata, as KEDA resolves it.
type kedaTrigger struct {
	connection        string // the Event Hubs connection string (with EntityPath)
	storageConnection string
	blobContainer     string
	consumerGroup     string // as written in the trigger; KEDA's default is $Default
}

// kedaCheckpointBlob resolves the blob KEDA's azure-eventhub scaler reads
// for a partition's checkpoint with checkpointStrategy: blobMetadata. It is
// a port of kedacore/keda pkg/scalers/azure/azure_eventhub_checkpoint.go
// (blobMetadataCheckpointer.resolvePath, as of commit 65ed041b9d58) and of
// the namespace and hub parsing it calls in pkg/scalers/azure/
// azure_eventhub.go (getHubAndNamespace, ParseAzureEventHubConnectionString):
//
//   - the namespace is the connection string's Endpoint value without the
//     "sb://" prefix and the trailing "/", the hub its EntityPath, both as
//     written (fields are found by prefix, split once at "=");
//   - the blob is {namespace}/{hub}/{lowercase consumer group}/checkpoint/{partition}
//     in the trigger's blobContainer;
//   - KEDA then calls url.Parse on that path and gives up on an error. A
//     namespace with a port puts a colon in the path's first segment:
//     url.Parse reads what precedes it as a scheme when it can be one
//     (localhost:5672 parses), and otherwise refuses the path ("first path
//     segment in URL cannot contain colon"), so KEDA cannot read the
//     checkpoints of an IP address with a port (127.0.0.1:5672, the
//     emulator's endpoints) at all.
func kedaCheckpointBlob(trig kedaTrigger, partition string) (container, blob string, err error) {
	container, blob, err = kedaBlobName(trig, partition)
	if err != nil {
		return "", "", err
	}
	if _, err := url.Parse(blob); err != nil {
		return "", "", fmt.Errorf("KEDA's checkpoint path for partition %s: %w", partition, err)
	}
	return container, blob, nil
}

// kedaBlobName is kedaCheckpointBlob without the url.Parse: the blob KEDA
// would read if the namespace had no port. Only the test of the lag
// computation on the emulator uses it, and says so.
func kedaBlobName(trig kedaTrigger, partition string) (container, blob string, err error) {
	var ns, hub string
	for _, part := range strings.Split(trig.connection, ";") {
		switch {
		case strings.HasPrefix(part, "Endpoint"):
			if kv := strings.SplitN(part, "=", 2); len(kv) == 2 {
				ns = strings.TrimSuffix(strings.TrimPrefix(kv[1], "sb://"), "/")
			}
		case strings.HasPrefix(part, "EntityPath"):
			if kv := strings.SplitN(part, "=", 2); len(kv) == 2 {
				hub = kv[1]
			}
		}
	}
	if ns == "" || hub == "" {
		return "", "", errors.New("can't parse event hub connection string: missing namespace (Endpoint) or event hub name (EntityPath)")
	}
	return trig.blobContainer, fmt.Sprintf("%s/%s/%s/checkpoint/%s", ns, hub, strings.ToLower(trig.consumerGroup), partition), nil
}

// TestKedaCheckpointBlob: the port resolves what KEDA resolves, and fails
// where KEDA fails: on a namespace that is an IP address with a port.
func TestKedaCheckpointBlob(t *testing.T) {
	for _, c := range []struct {
		connection, group string
		want              string // the blob, or "" when KEDA fails
		wantErr           string
	}{
		{"Endpoint=sb://ehns.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=v;EntityPath=orders", "$Default",
			"ehns.servicebus.windows.net/orders/$default/checkpoint/3", ""},
		{"Endpoint=sb://EHNS.servicebus.windows.net;SharedAccessKeyName=k;SharedAccessKey=v;EntityPath=Orders", "Readers",
			"EHNS.servicebus.windows.net/Orders/readers/checkpoint/3", ""},
		{"Endpoint=sb://127.0.0.1:5672;SharedAccessKeyName=k;SharedAccessKey=v;EntityPath=orders;UseDevelopmentEmulator=true", "$Default",
			"", "first path segment in URL cannot contain colon"},
		// "localhost:" parses as a URL scheme, so KEDA reads this one: only a
		// host that cannot be a scheme (an IP address) fails.
		{"Endpoint=sb://localhost:5672/;SharedAccessKeyName=k;SharedAccessKey=v;EntityPath=orders;UseDevelopmentEmulator=true", "$Default",
			"localhost:5672/orders/$default/checkpoint/3", ""},
		{"Endpoint=sb://[::1]:5672;SharedAccessKeyName=k;SharedAccessKey=v;EntityPath=orders;UseDevelopmentEmulator=true", "$Default",
			"", "first path segment in URL cannot contain colon"},
		{"Endpoint=sb://ehns.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=v", "$Default",
			"", "missing namespace"},
	} {
		container, blob, err := kedaCheckpointBlob(kedaTrigger{connection: c.connection, consumerGroup: c.group, blobContainer: "ckpt"}, "3")
		switch {
		case c.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%s: blob %q, error %v; want KEDA's error %q", c.connection, blob, err, c.wantErr)
			}
		case err != nil || blob != c.want || container != "ckpt":
			t.Errorf("%s: %s/%s, %v; want ckpt/%s", c.connection, container, blob, err, c.want)
		}
	}
}

// kedaLag computes the unprocessed events per partition the way KEDA's
// azure-eventhub scaler does (pkg/scalers/azure_eventhub_scaler.go and
// pkg/scalers/azure/azure_eventhub_checkpoint.go in kedacore/keda): the
// partitions' last enqueued sequence numbers from the hub, and for each
// partition the blob kedaCheckpointBlob resolves, failing where KEDA
// fails. The checkpoint is the blob's "sequencenumber" metadata (or
// "Sequencenumber", as the Go HTTP stack canonicalises the header); a
// missing blob counts every retained event. resolve is kedaCheckpointBlob,
// or kedaBlobName to compute the lag past the path KEDA cannot parse.
func kedaLag(ctx context.Context, trig kedaTrigger, resolve func(kedaTrigger, string) (string, string, error)) (map[string]int64, error) {
	producer, err := azeventhubs.NewProducerClientFromConnectionString(trig.connection, "", nil)
	if err != nil {
		return nil, err
	}
	defer producer.Close(context.WithoutCancel(ctx))
	blobs, err := azblob.NewClientFromConnectionString(trig.storageConnection, nil)
	if err != nil {
		return nil, err
	}
	hp, err := producer.GetEventHubProperties(ctx, nil)
	if err != nil {
		return nil, err
	}
	lag := map[string]int64{}
	for _, id := range hp.PartitionIDs {
		pp, err := producer.GetPartitionProperties(ctx, id, nil)
		if err != nil {
			return nil, err
		}
		if pp.LastEnqueuedSequenceNumber == -1 { // KEDA: an empty partition
			lag[id] = 0
			continue
		}
		container, path, err := resolve(trig, id)
		if err != nil {
			return nil, err
		}
		get, err := blobs.DownloadStream(ctx, container, path, nil)
		if bloberror.HasCode(err, bloberror.BlobNotFound, bloberror.ContainerNotFound) {
			// KEDA's GetUnprocessedEventCountWithoutCheckpoint.
			if (pp.BeginningSequenceNumber == 0 && pp.LastEnqueuedSequenceNumber == 0) || pp.BeginningSequenceNumber != pp.LastEnqueuedSequenceNumber {
				lag[id] = pp.LastEnqueuedSequenceNumber - pp.BeginningSequenceNumber + 1
			} else {
				lag[id] = 0
			}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("checkpoint blob %s: %w", path, err)
		}
		_ = get.Body.Close()
		sn, ok := get.Metadata["sequencenumber"]
		if !ok {
			sn, ok = get.Metadata["Sequencenumber"]
		}
		if !ok || sn == nil {
			return nil, fmt.Errorf("checkpoint blob %s: no sequencenumber metadata (%v)", path, get.Metadata)
		}
		seq, err := strconv.ParseInt(*sn, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("checkpoint blob %s: sequencenumber: %w", path, err)
		}
		// KEDA's calculateUnprocessedEvents, stale-threshold 10000.
		n := pp.LastEnqueuedSequenceNumber - seq
		if pp.LastEnqueuedSequenceNumber < seq {
			n = (math.MaxInt64 - seq) + pp.LastEnqueuedSequenceNumber
		}
		if n > math.MaxInt64-10000 {
			n = 0
		}
		lag[id] = n
	}
	return lag, nil
}

// checkpointsListLag runs `ehsink checkpoints list` and returns the LAG
// column per partition.
func checkpointsListLag(t *testing.T, ctx context.Context, cfg string) map[string]int64 {
	t.Helper()
	cmd := exec.CommandContext(ctx, binary, "checkpoints", "list", "-c", cfg)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || stderr.Len() > 0 {
		t.Fatalf("ehsink checkpoints list: %v\n%s%s", err, out, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	lag := map[string]int64{}
	for i, l := range lines {
		f := strings.Fields(l)
		if i < 2 || len(f) == 0 { // the title line and the column header
			continue
		}
		n, err := strconv.ParseInt(f[len(f)-1], 10, 64)
		if err != nil {
			t.Fatalf("ehsink checkpoints list: line %q: lag: %v\n%s", l, err, out)
		}
		lag[f[0]] = n
	}
	return lag
}

// TestKEDAReadsCheckpoints runs a connector with Blob checkpoints on Azurite
// and a consumer group written as "$Default", stops it, sends more events,
// and reads the checkpoints as KEDA's azure-eventhub scaler does with
// checkpointStrategy: blobMetadata.
//
// The emulator's namespace carries a port, so KEDA's path resolution fails
// (url.Parse), as it does on every poll of a real KEDA: the test requires
// that error. It then computes KEDA's lag from the blob KEDA would read for
// a namespace without a port (every real Event Hubs namespace), which must
// equal `ehsink checkpoints list` per partition and the events sent after
// the stop: ehsink writes the blobs where KEDA looks for them.
func TestKEDAReadsCheckpoints(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	const parts, first, more = 4, 400, 37
	srv := emulatortest.Start(t, emulator.Config{Hubs: []emulator.HubConfig{{Name: "orders", Partitions: parts}}})
	az := testenv.NewAzurite(t)
	conn := srv.ConnectionString("orders")
	trig := kedaTrigger{
		connection:        conn,
		storageConnection: az.ConnectionString(),
		blobContainer:     "ehsink-checkpoints",
		consumerGroup:     "$Default",
	}

	work := t.TempDir()
	cfg := filepath.Join(work, "connectors.yaml")
	if err := os.WriteFile(cfg, []byte(`
drain_timeout: 20s
connectors:
  - name: orders-out
    source:
      connection: "`+conn+`"
      consumer_group: $Default
      start: earliest
      batch: {max_events: 50, max_wait: 200ms}
      load_balancing: {strategy: greedy, update_interval: 1s, ownership_expiration: 4s}
    checkpoint:
      blob: {connection: "`+az.ConnectionString()+`", container: `+trig.blobContainer+`}
    sink:
      type: stdout
`), 0o600); err != nil {
		t.Fatal(err)
	}

	producer, err := azeventhubs.NewProducerClientFromConnectionString(conn, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close(context.Background())
	if n, err := produce.Demo(ctx, producer, produce.DemoOptions{Count: first, Keys: 40}); err != nil || n != first {
		t.Fatalf("producer: %d, %v", n, err)
	}

	r := startReplica(t, "replica", cfg)
	if _, err := kedaLag(ctx, trig, kedaCheckpointBlob); err == nil || !strings.Contains(err.Error(), "first path segment in URL cannot contain colon") {
		t.Fatalf("KEDA's path resolution on the emulator's namespace %s: %v; want url.Parse's error, as KEDA gets", conn, err)
	}
	waitUntil(t, ctx, "KEDA to read a lag of 0 on every partition", func() bool {
		lag, err := kedaLag(ctx, trig, kedaBlobName)
		if err != nil {
			t.Fatalf("KEDA-style read: %v", err)
		}
		var total int64
		for _, n := range lag {
			total += n
		}
		return len(lag) == parts && total == 0
	}, r)
	if err := r.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	<-r.done
	if r.err != nil {
		t.Fatalf("ehsink run exited with %v after SIGINT", r.err)
	}

	if n, err := produce.Demo(ctx, producer, produce.DemoOptions{Count: more, Keys: 40}); err != nil || n != more {
		t.Fatalf("producer: %d, %v", n, err)
	}
	keda, err := kedaLag(ctx, trig, kedaBlobName)
	if err != nil {
		t.Fatalf("KEDA-style read: %v", err)
	}
	ours := checkpointsListLag(t, ctx, cfg)
	var total int64
	for id := range parts {
		pid := strconv.Itoa(id)
		if keda[pid] != ours[pid] {
			t.Errorf("partition %s: KEDA reads a lag of %d, ehsink checkpoints list says %d", pid, keda[pid], ours[pid])
		}
		total += keda[pid]
	}
	if total != more {
		t.Errorf("KEDA reads a total lag of %d (%v), want the %d events sent after the stop", total, keda, more)
	}
	t.Logf("lag per partition: KEDA %v, ehsink %v", keda, ours)
}
