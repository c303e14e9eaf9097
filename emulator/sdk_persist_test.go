package emulator

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/internal/secret"
	"github.com/ehsink/ehsink/internal/testenv"
)

// TestSDKRestartWithDataDir: a second emulator on the same data dir serves
// the same events with the same sequence numbers, offsets and times, and
// continues numbering after them.
func TestSDKRestartWithDataDir(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{DataDir: dir, Hubs: []HubConfig{{Name: "orders", Partitions: 2}}}
	ctx := testCtx(t)
	read := func(srv *Server, n int) []*azeventhubs.ReceivedEventData {
		c := newConsumer(t, srv, "orders", "", nil)
		pc, err := c.NewPartitionClient("1", &azeventhubs.PartitionClientOptions{StartPosition: azeventhubs.StartPosition{Earliest: ptr(true)}})
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close(ctx)
		return receiveN(t, pc, n)
	}

	srv1, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	p1, err := azeventhubs.NewProducerClientFromConnectionString(srv1.ConnectionString("orders"), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	sendNumbered(t, p1, "1", 0, 10)
	before := read(srv1, 10)
	p1.Close(ctx)
	if err := srv1.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if n, errs := srv1.ProtocolErrors(); n > 0 {
		t.Errorf("the first emulator closed %d connection(s) on protocol errors: %q", n, errs)
	}

	srv2 := startEmulator(t, cfg)
	after := read(srv2, 10)
	for i := range before {
		b, a := before[i], after[i]
		if b.SequenceNumber != a.SequenceNumber || b.Offset != a.Offset || !b.EnqueuedTime.Equal(*a.EnqueuedTime) || string(b.Body) != string(a.Body) {
			t.Fatalf("event %d changed across the restart: before seq %d off %s body %q, after seq %d off %s body %q",
				i, b.SequenceNumber, b.Offset, b.Body, a.SequenceNumber, a.Offset, a.Body)
		}
	}
	p2 := newProducer(t, srv2, "orders")
	sendNumbered(t, p2, "1", 10, 1)
	if all := read(srv2, 11); all[10].SequenceNumber != 10 {
		t.Fatalf("first event after restart has seq %d, want 10", all[10].SequenceNumber)
	}
}

// TestSDKKeys: with Config.Keys the emulator verifies CBS tokens; a wrong
// key is unauthorized (fatal for the SDK), the right one works.
func TestSDKKeys(t *testing.T) {
	srv := startEmulator(t, Config{Keys: map[string]secret.String{"send": "c2VjcmV0"}})
	ctx := testCtx(t)
	good := newProducer(t, srv, "orders")
	sendEvents(t, good, nil, "ok")

	bad, err := azeventhubs.NewProducerClientFromConnectionString(
		"Endpoint=sb://"+srv.Addr()+";SharedAccessKeyName=send;SharedAccessKey=wrong;EntityPath=orders;UseDevelopmentEmulator=true", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close(context.Background())
	// The CBS put-token answer is 401, which the SDK treats as fatal.
	if _, err = bad.GetEventHubProperties(ctx, nil); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("GetEventHubProperties with a wrong key: %v, want a 401", err)
	}
	if _, err = bad.NewEventDataBatch(ctx, nil); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("NewEventDataBatch with a wrong key: %v, want a 401", err)
	}
}

// TestSDKUnreadablePartitionIsAnError: a partition whose stored records
// cannot be read (here records overwritten on disk under the running
// emulator) detaches the receiver's link with an internal error, logged
// with the receiver and the cause, instead of leaving a link attached
// that delivers nothing and says nothing (the SDK retries an internal
// error, so the log is where it shows).
func TestSDKUnreadablePartitionIsAnError(t *testing.T) {
	dir := t.TempDir()
	var logs testenv.LogBuffer
	srv := startEmulator(t, Config{
		DataDir: dir, Hubs: []HubConfig{{Name: "orders", Partitions: 2}},
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	p := newProducer(t, srv, "orders")
	sendNumbered(t, p, "1", 0, 10)
	segs, err := filepath.Glob(filepath.Join(dir, "orders", "1", "*.seg"))
	if err != nil || len(segs) != 1 {
		t.Fatalf("segment files of partition 1: %v %v", segs, err)
	}
	f, err := os.OpenFile(segs[0], os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	// Garbage over the middle of the records: their checksums fail.
	if _, err := f.WriteAt(bytes.Repeat([]byte{0xff}, 64), st.Size()/2); err != nil {
		t.Fatal(err)
	}
	f.Close()

	c := newConsumer(t, srv, "orders", "", nil)
	pc, err := c.NewPartitionClient("1", &azeventhubs.PartitionClientOptions{StartPosition: azeventhubs.StartPosition{Earliest: ptr(true)}})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	evs, _ := pc.ReceiveEvents(ctx, 10, nil)
	if len(evs) == 10 {
		t.Fatal("every event of the damaged partition was delivered")
	}
	out := logs.String()
	if !strings.Contains(out, "cannot read its partition") || !strings.Contains(out, `partition 1`) || !strings.Contains(out, "checksum") {
		t.Fatalf("the emulator did not say the partition cannot be read; its log:\n%s", out)
	}
}
