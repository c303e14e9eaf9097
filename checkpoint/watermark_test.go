package checkpoint_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/checkpoint"
	"github.com/ehsink/ehsink/sinks"
)

func TestWithWatermarks(t *testing.T) {
	ctx := context.Background()
	s := newFileStore(t)
	for _, c := range []azeventhubs.Checkpoint{checkpointAt("0", 10, "1000"), checkpointAt("1", 30, "3000")} {
		if err := s.SetCheckpoint(ctx, c, nil); err != nil {
			t.Fatal(err)
		}
	}
	// Partition 2 is owned but never checkpointed; its sink holds events.
	if _, err := s.ClaimOwnership(ctx, []azeventhubs.Ownership{ownership("2", "me", nil)}, nil); err != nil {
		t.Fatal(err)
	}
	watermarks := map[string]*sinks.Position{
		"0": {SequenceNumber: 25},                 // sink ahead, sequence number only
		"1": {SequenceNumber: 20, Offset: "2000"}, // checkpoint ahead
		"2": {SequenceNumber: 5, Offset: "500"},   // watermark only, via ownership
		"3": nil,                                  // listed by option, nothing anywhere
		"4": {SequenceNumber: 100},                // unknown partition: not asked for
		"5": {SequenceNumber: 7},                  // watermark only, via option
	}
	var asked []string
	w := checkpoint.WithWatermarks(s, func(_ context.Context, pid string) (*sinks.Position, error) {
		asked = append(asked, pid)
		return watermarks[pid], nil
	}, &checkpoint.WatermarkOptions{PartitionIDs: []string{"3", "5", "0"}})

	got, err := w.ListCheckpoints(ctx, testNS, testEH, testCG, nil)
	if err != nil {
		t.Fatalf("ListCheckpoints: %v", err)
	}
	assertPositions(t, "merged", positions(t, got), map[string]string{
		"0": "seq=25",
		"1": "seq=30 off=3000",
		"2": "seq=5 off=500",
		"5": "seq=7",
	})
	for _, c := range got {
		if c.FullyQualifiedNamespace != testNS || c.EventHubName != testEH || c.ConsumerGroup != testCG {
			t.Errorf("partition %s: names %s/%s/%s", c.PartitionID, c.FullyQualifiedNamespace, c.EventHubName, c.ConsumerGroup)
		}
	}
	if len(asked) != 5 {
		t.Errorf("watermark asked for %v, want each of 0,1,2,3,5 once", asked)
	}

	// Nothing was written: the stored checkpoints are unchanged.
	stored, _ := s.ListCheckpoints(ctx, testNS, testEH, testCG, nil)
	assertPositions(t, "stored", positions(t, stored), map[string]string{"0": "seq=10 off=1000", "1": "seq=30 off=3000"})

	// SetCheckpoint and ownership pass through.
	if err := w.SetCheckpoint(ctx, checkpointAt("0", 40, "4000"), nil); err != nil {
		t.Fatal(err)
	}
	stored, _ = s.ListCheckpoints(ctx, testNS, testEH, testCG, nil)
	assertPositions(t, "stored after SetCheckpoint", positions(t, stored), map[string]string{"0": "seq=40 off=4000", "1": "seq=30 off=3000"})
	owned, err := w.ListOwnership(ctx, testNS, testEH, testCG, nil)
	if err != nil || len(owned) != 1 || owned[0].PartitionID != "2" {
		t.Fatalf("ListOwnership = %+v, %v", owned, err)
	}
}

func TestWithWatermarksError(t *testing.T) {
	ctx := context.Background()
	s := newFileStore(t)
	if err := s.SetCheckpoint(ctx, checkpointAt("7", 1, "1"), nil); err != nil {
		t.Fatal(err)
	}
	errSink := errors.New("sink down")
	w := checkpoint.WithWatermarks(s, func(context.Context, string) (*sinks.Position, error) { return nil, errSink }, nil)
	_, err := w.ListCheckpoints(ctx, testNS, testEH, testCG, nil)
	if !errors.Is(err, errSink) {
		t.Fatalf("ListCheckpoints = %v, want the watermark error", err)
	}
	if want := "partition 7"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not name %s", err, want)
	}
}
