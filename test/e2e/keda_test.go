package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"math"
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

// kedaLag computes the unprocessed events per partition the way KEDA's
// azure-eventhub scaler does (pkg/scalers/azure_eventhub_scaler.go and
// pkg/scalers/azure/azure_eventhub_checkpoint.go in kedacore/keda): the
// partitions' last enqueued sequence numbers from the hub, and for each
// partition the blob
//
//	{namespace}/{eventhub}/{lowercase consumer group}/checkpoint/{partition}
//
// where namespace is the connection string's Endpoint without "sb://" and
// the trailing "/", and eventhub its EntityPath, both as written (KEDA
// lowercases only the consumer group). The checkpoint is the blob's
// "sequencenumber" metadata (or "Sequencenumber", as the Go HTTP stack
// canonicalises the header); a missing blob counts every retained event.
func kedaLag(ctx context.Context, trig kedaTrigger) (map[string]int64, error) {
	var ns, hub string
	for part := range strings.SplitSeq(trig.connection, ";") {
		k, v, ok := strings.Cut(part, "=")
		switch {
		case !ok:
		case strings.EqualFold(strings.TrimSpace(k), "Endpoint"):
			ns = strings.TrimSuffix(strings.TrimPrefix(v, "sb://"), "/")
		case strings.EqualFold(strings.TrimSpace(k), "EntityPath"):
			hub = v
		}
	}
	if ns == "" || hub == "" {
		return nil, fmt.Errorf("connection string without Endpoint or EntityPath")
	}
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
		path := fmt.Sprintf("%s/%s/%s/checkpoint/%s", ns, hub, strings.ToLower(trig.consumerGroup), id)
		get, err := blobs.DownloadStream(ctx, trig.blobContainer, path, nil)
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
// and reads the checkpoints the way KEDA's azure-eventhub scaler does with
// checkpointStrategy: blobMetadata: KEDA must see the same lag per
// partition as `ehsink checkpoints list`, and both must be the events sent
// after the stop. A checkpoint KEDA could not find would count every
// retained event instead.
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
	waitUntil(t, ctx, "KEDA to read a lag of 0 on every partition", func() bool {
		lag, err := kedaLag(ctx, trig)
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
	keda, err := kedaLag(ctx, trig)
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
