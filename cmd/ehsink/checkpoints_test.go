package main

import (
	"bytes"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/connector"
	"github.com/ehsink/ehsink/produce"
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
	cfg := writeConfig(t, `
emulator:
  listen: `+srv.Addr()+`
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
	store, err := connector.NewCheckpointStore(ctx, connector.CheckpointSpec{File: &connector.FileCheckpointSpec{Dir: dir}}, nil)
	if err != nil {
		t.Fatal(err)
	}
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
	if code != 0 {
		t.Fatalf("list: exit %d: %s", code, stderr)
	}
	t.Logf("list:\n%s", stdout)
	for _, re := range []string{
		`(?m)^0\s+9\s+` + regexp.QuoteMeta(off) + `\s+-\s+-\s+29\s+20$`,
		`(?m)^1\s+-\s+-\s+replica-x\s+live, renewed \d+s ago\s+29\s+30$`,
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
