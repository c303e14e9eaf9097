package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/emulator"
	"github.com/ehsink/ehsink/emulator/emulatortest"
	"github.com/ehsink/ehsink/internal/connector"
	"github.com/ehsink/ehsink/internal/produce"
	"github.com/ehsink/ehsink/internal/secret"
	"github.com/ehsink/ehsink/internal/testenv"
)

func callCheckpoints(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := runCheckpoints(t.Context(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestCheckpointsListAndReset drives `ehsink checkpoints` against an
// emulator with a file checkpoint store: list shows checkpoints, owners and
// lag; reset is a dry run without --yes, refuses owned partitions without
// --force, and moves checkpoints to earliest, latest and a time.
func TestCheckpointsListAndReset(t *testing.T) {
	ctx := t.Context()
	srv := startTestEmulator(t, 2)
	conn := srv.ConnectionString("orders")
	producer, err := azeventhubs.NewProducerClientFromConnectionString(conn, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close(ctx)
	for _, part := range []string{"0", "1"} {
		for batch := range 3 { // three sends, so enqueued times differ between them
			var b strings.Builder
			for i := range 10 {
				fmt.Fprintf(&b, "p%s-%d\n", part, batch*10+i)
			}
			if _, err := produce.Lines(ctx, producer, strings.NewReader(b.String()), produce.LinesOptions{PartitionID: part}); err != nil {
				t.Fatal(err)
			}
		}
	}
	dir := filepath.Join(t.TempDir(), "ckpt")
	cfg := checkpointsConfig(t, srv.Addr(), dir)
	store := fileCheckpointStore(t, dir)
	ns, hub, cg := connector.EmulatorNamespace, "orders", azeventhubs.DefaultConsumerGroup
	seq, off := int64(9), "" // offset of event 9, read below
	events := readAll(t, conn)
	off = events["0"][9].Offset
	if err := store.SetCheckpoint(ctx, azeventhubs.Checkpoint{FullyQualifiedNamespace: ns, EventHubName: hub, ConsumerGroup: cg, PartitionID: "0", SequenceNumber: &seq, Offset: &off}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := store.ClaimOwnership(ctx, []azeventhubs.Ownership{{FullyQualifiedNamespace: ns, EventHubName: hub, ConsumerGroup: cg, PartitionID: "1", OwnerID: "replica-x"}}, nil); err != nil {
		t.Fatal(err)
	}
	checkpointOf := func(id string) string {
		t.Helper()
		cps, err := store.ListCheckpoints(ctx, ns, hub, cg, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, cp := range cps {
			if cp.PartitionID == id {
				return fmt.Sprintf("%d/%s", *cp.SequenceNumber, *cp.Offset)
			}
		}
		return "none"
	}

	code, stdout, stderr := callCheckpoints(t, "list", "-c", cfg)
	if code != 0 || stderr != "" {
		t.Fatalf("list: exit %d: %s", code, stderr)
	}
	t.Logf("list:\n%s", stdout)
	for _, re := range []string{
		`(?m)^0\s+9\s+` + regexp.QuoteMeta(off) + `\s+-\s+-\s+ok\s+29\s+20$`,
		`(?m)^1\s+-\s+-\s+replica-x\s+live, renewed \d+s ago\s+ok\s+29\s+30$`,
	} {
		if !regexp.MustCompile(re).MatchString(stdout) {
			t.Errorf("list output does not match %s", re)
		}
	}

	// dry run
	code, stdout, stderr = callCheckpoints(t, "reset", "-c", cfg, "--to", "earliest", "--partition", "0")
	if code != 1 || !strings.Contains(stderr, "--yes") || !strings.Contains(stdout, "would move") || checkpointOf("0") != "9/"+off {
		t.Errorf("reset without --yes: exit %d, stdout %q, stderr %q, checkpoint %s", code, stdout, stderr, checkpointOf("0"))
	}
	// owned partition refused
	code, _, stderr = callCheckpoints(t, "reset", "-c", cfg, "--to", "earliest", "--yes")
	if code != 1 || !strings.Contains(stderr, "replica-x") || !strings.Contains(stderr, "--force") || checkpointOf("0") != "9/"+off {
		t.Errorf("reset of an owned partition: exit %d, stderr %q, checkpoint 0 %s", code, stderr, checkpointOf("0"))
	}

	steps := []struct {
		args []string
		id   string
		want string
	}{
		{[]string{"--to", "earliest", "--partition", "0"}, "0", "-1/-1"},
		{[]string{"--to", "latest", "--partition", "0"}, "0", fmt.Sprintf("29/%s", events["0"][29].Offset)},
		{[]string{"--to", "earliest", "--force"}, "1", "-1/-1"},
	}
	// a time: the first event enqueued at or after the time of event 12
	at := *events["0"][12].EnqueuedTime
	first := 0
	for events["0"][first].EnqueuedTime.Before(at) {
		first++
	}
	steps = append(steps, struct {
		args []string
		id   string
		want string
	}{[]string{"--to", at.Format("2006-01-02T15:04:05.000Z07:00"), "--partition", "0"}, "0",
		fmt.Sprintf("%d/%s", first-1, offsetBefore(events["0"], first))})
	for _, st := range steps {
		args := append([]string{"reset", "-c", cfg, "--yes"}, st.args...)
		code, stdout, stderr := callCheckpoints(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", st.args, code, stderr)
		}
		if got := checkpointOf(st.id); got != st.want {
			t.Errorf("%v: checkpoint of partition %s is %s, want %s (stdout %q)", st.args, st.id, got, st.want, stdout)
		}
	}
}

func offsetBefore(evs []*azeventhubs.ReceivedEventData, i int) string {
	if i == 0 {
		return "-1"
	}
	return evs[i-1].Offset
}

func TestCheckpointsUsage(t *testing.T) {
	for _, tt := range []struct {
		args []string
		says string
	}{
		{nil, "Usage"},
		{[]string{"show"}, "unknown action"},
		{[]string{"list"}, "-c connectors.yaml is required"},
		{[]string{"list", "-c", "x.yaml", "--yes"}, "go with reset"},
		{[]string{"reset", "-c", "x.yaml"}, "--to: required"},
		{[]string{"reset", "-c", "x.yaml", "--to", "yesterday"}, "not earliest, latest or an RFC 3339 time"},
	} {
		code, _, stderr := callCheckpoints(t, tt.args...)
		if code != 2 || !strings.Contains(stderr, tt.says) {
			t.Errorf("%v: exit %d, stderr %q; want 2 saying %q", tt.args, code, stderr, tt.says)
		}
	}
	if code, stdout, _ := callCheckpoints(t, "--help"); code != 0 || !strings.Contains(stdout, "ehsink checkpoints reset") {
		t.Errorf("--help: exit %d, %q", code, stdout)
	}
}

// TestCheckpointsListFlags: list flags a checkpoint past the partition's
// end (AHEAD, lag "?"), one before its retained range (EXPIRED, with the
// number of events lost), and a live owner whose checkpoint and oldest
// waiting event are both older than --stalled-after (STALLED); a live owner
// that is caught up, or whose checkpoint is recent, is ok.
func TestCheckpointsListFlags(t *testing.T) {
	ctx := t.Context()
	// Retention by size drops the oldest events of a partition that grows
	// past it.
	srv := emulatortest.Start(t, emulator.Config{Hubs: []emulator.HubConfig{{Name: "orders", Partitions: 4}}, RetentionBytes: 4096})
	conn := srv.ConnectionString("orders")
	producer, err := azeventhubs.NewProducerClientFromConnectionString(conn, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close(ctx)
	send := func(part string, n int) {
		t.Helper()
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "%s-%03d-%s\n", part, i, strings.Repeat("x", 100))
		}
		if _, err := produce.Lines(ctx, producer, strings.NewReader(b.String()), produce.LinesOptions{PartitionID: part}); err != nil {
			t.Fatal(err)
		}
	}
	for _, part := range []string{"0", "1", "2"} {
		send(part, 10)
	}
	client, err := azeventhubs.NewConsumerClientFromConnectionString(conn, "", azeventhubs.DefaultConsumerGroup, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(ctx)
	var begin int64
	for i := 0; begin < 5; i++ { // partition 3 until retention dropped its first events
		if i == 100 {
			t.Fatalf("retention dropped nothing of partition 3 (beginning seq %d)", begin)
		}
		send("3", 10)
		pp, err := client.GetPartitionProperties(ctx, "3", nil)
		if err != nil {
			t.Fatal(err)
		}
		begin = pp.BeginningSequenceNumber
	}

	dir := filepath.Join(t.TempDir(), "ckpt")
	cfg := checkpointsConfig(t, srv.Addr(), dir)
	store := fileCheckpointStore(t, dir)
	ns, hub, cg := connector.EmulatorNamespace, "orders", azeventhubs.DefaultConsumerGroup
	setCheckpoint := func(part string, seq int64) {
		t.Helper()
		off := "0"
		if err := store.SetCheckpoint(ctx, azeventhubs.Checkpoint{FullyQualifiedNamespace: ns, EventHubName: hub, ConsumerGroup: cg,
			PartitionID: part, SequenceNumber: &seq, Offset: &off}, nil); err != nil {
			t.Fatal(err)
		}
	}
	setCheckpoint("0", 100) // past the end: the partition holds 0..9
	setCheckpoint("1", 2)   // a live owner that stopped moving
	setCheckpoint("2", 9)   // a live owner that is caught up
	setCheckpoint("3", 1)   // retention dropped events after it
	for _, part := range []string{"1", "2"} {
		if _, err := store.ClaimOwnership(ctx, []azeventhubs.Ownership{{FullyQualifiedNamespace: ns, EventHubName: hub, ConsumerGroup: cg,
			PartitionID: part, OwnerID: "replica-" + part}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(filepath.Join(dir, strings.ToLower(ns), hub, strings.ToLower(cg), "checkpoint", "1"), old, old); err != nil {
		t.Fatal(err)
	}

	code, stdout, stderr := callCheckpoints(t, "list", "-c", cfg, "--stalled-after", "1ms")
	if code != 0 {
		t.Fatalf("list: exit %d: %s", code, stderr)
	}
	t.Logf("list:\n%s%s", stdout, stderr)
	for _, re := range []string{
		`(?m)^0\s+100\s+0\s+-\s+-\s+AHEAD\s+9\s+\?$`,
		`(?m)^1\s+2\s+0\s+replica-1\s+live, renewed \d+s ago\s+STALLED\s+9\s+7$`,
		`(?m)^2\s+9\s+0\s+replica-2\s+live, renewed \d+s ago\s+ok\s+9\s+0$`,
		`(?m)^3\s+1\s+0\s+-\s+-\s+EXPIRED\s+\d+\s+\d+$`,
	} {
		if !regexp.MustCompile(re).MatchString(stdout) {
			t.Errorf("list output does not match %s", re)
		}
	}
	for _, says := range []string{
		`partition 0: AHEAD: checkpoint seq 100 is past the partition's last event (seq 9)`,
		`partition 1: STALLED: owner replica-1`,
		fmt.Sprintf(`partition 3: EXPIRED: events seq 2..%d (%d) were dropped by retention`, begin-1, begin-2),
	} {
		if !strings.Contains(stderr, says) {
			t.Errorf("stderr does not say %q", says)
		}
	}
	if strings.Contains(stderr, "partition 2") {
		t.Errorf("stderr flags the caught-up partition 2: %s", stderr)
	}

	// With the default bound (twice the ownership expiration), an hour-old
	// checkpoint is a stall only if the waiting events are that old too:
	// these were sent a moment ago.
	code, stdout, stderr = callCheckpoints(t, "list", "-c", cfg)
	if code != 0 || !regexp.MustCompile(`(?m)^1\s+2\s+0\s+replica-1\s+live, renewed \d+s ago\s+ok\s+9\s+7$`).MatchString(stdout) ||
		strings.Contains(stderr, "STALLED") {
		t.Errorf("list with the default --stalled-after: exit %d\n%s%s", code, stdout, stderr)
	}
}

// checkpointsConfig writes a config with one connector on the emulator at
// addr, checkpointing into dir.
func checkpointsConfig(t *testing.T, addr, dir string) string {
	t.Helper()
	return writeConfig(t, `
emulator:
  listen: `+addr+`
connectors:
  - name: orders-out
    source:
      connection: emulator
      eventhub: orders
    checkpoint:
      file: {dir: `+dir+`}
    sink:
      type: stdout
`)
}

// fileCheckpointStore opens dir as the connector does.
func fileCheckpointStore(t *testing.T, dir string) azeventhubs.CheckpointStore {
	t.Helper()
	store, err := connector.NewCheckpointStore(t.Context(), connector.CheckpointSpec{File: &connector.FileCheckpointSpec{Dir: dir}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return store
}

// TestCheckpointsListStalledOnBlob: with Blob checkpoints (Azurite), the
// checkpoint's time is its blob's last-modified time.
func TestCheckpointsListStalledOnBlob(t *testing.T) {
	ctx := t.Context()
	az := testenv.Azurite(t) // shared with the Parquet replay test: one start (about 10 s here) for the package
	srv := startTestEmulator(t, 1)
	conn := srv.ConnectionString("orders")
	producer, err := azeventhubs.NewProducerClientFromConnectionString(conn, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close(ctx)
	if _, err := produce.Lines(ctx, producer, strings.NewReader("a\nb\nc\nd\ne\n"), produce.LinesOptions{PartitionID: "0"}); err != nil {
		t.Fatal(err)
	}
	container := az.ContainerName(t)
	cfg := writeConfig(t, `
emulator:
  listen: `+srv.Addr()+`
connectors:
  - name: orders-out
    source:
      connection: emulator
      eventhub: orders
    checkpoint:
      blob: {connection: "`+az.ConnectionString()+`", container: `+container+`}
    sink:
      type: stdout
`)
	store, err := connector.NewCheckpointStore(ctx, connector.CheckpointSpec{Blob: &connector.BlobCheckpointSpec{
		Connection: secret.String(az.ConnectionString()), Container: container}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ns, hub, cg := connector.EmulatorNamespace, "orders", azeventhubs.DefaultConsumerGroup
	seq, off := int64(1), "0"
	if err := store.SetCheckpoint(ctx, azeventhubs.Checkpoint{FullyQualifiedNamespace: ns, EventHubName: hub, ConsumerGroup: cg,
		PartitionID: "0", SequenceNumber: &seq, Offset: &off}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := store.ClaimOwnership(ctx, []azeventhubs.Ownership{{FullyQualifiedNamespace: ns, EventHubName: hub, ConsumerGroup: cg,
		PartitionID: "0", OwnerID: "replica-0"}}, nil); err != nil {
		t.Fatal(err)
	}
	stalled := regexp.MustCompile(`(?m)^0\s+1\s+0\s+replica-0\s+live, renewed \d+s ago\s+STALLED\s+4\s+3$`)
	code, stdout, stderr := callCheckpoints(t, "list", "-c", cfg, "--stalled-after", "1ms")
	if code != 0 || !stalled.MatchString(stdout) || !strings.Contains(stderr, "partition 0: STALLED: owner replica-0") {
		t.Errorf("list --stalled-after 1ms: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = callCheckpoints(t, "list", "-c", cfg)
	if code != 0 || stalled.MatchString(stdout) || strings.Contains(stderr, "STALLED") {
		t.Errorf("list: exit %d\n%s%s", code, stdout, stderr)
	}
}
