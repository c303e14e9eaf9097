package deadletters_test

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/ehsink/ehsink/internal/connector"
	"github.com/ehsink/ehsink/internal/deadletters"
	"github.com/ehsink/ehsink/sinks"
)

// TestFileLetterIDsAreStable: a letter's ID comes from its partition and
// its line in that partition's file, so letters appended to partition 0
// (whose file sorts first) leave partition 1's IDs as they were.
func TestFileLetterIDsAreStable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	store, err := connector.NewFileDeadLetters(dir)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	add := func(partition string, seqs ...int64) {
		t.Helper()
		var letters []sinks.DeadLetter
		for _, s := range seqs {
			letters = append(letters, sinks.DeadLetter{Event: sinks.Event{Partition: partition, SequenceNumber: s, Body: []byte(`{}`)}, Reason: "bad", FailedAt: at})
		}
		if err := store.Store(context.Background(), partition, -1, letters); err != nil {
			t.Fatal(err)
		}
	}
	ids := func() map[int64]int64 { // by sequence number (unique across partitions here)
		t.Helper()
		letters, err := deadletters.Files{Dir: dir}.ReadLetters(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		out := map[int64]int64{}
		for _, l := range letters {
			out[l.Event.SequenceNumber] = l.ID
		}
		return out
	}
	add("0", 1)
	add("1", 10, 11)
	before := ids()
	if want := map[int64]int64{1: 1, 10: 1_000_000_001, 11: 1_000_000_002}; !maps.Equal(before, want) {
		t.Fatalf("IDs %v, want %v", before, want)
	}
	add("0", 2, 3)
	after := ids()
	for seq, id := range before {
		if after[seq] != id {
			t.Fatalf("letter of seq %d: ID %d became %d once partition 0 got more letters", seq, id, after[seq])
		}
	}
	if after[2] != 2 || after[3] != 3 {
		t.Fatalf("partition 0's new letters: IDs %d, %d, want 2, 3", after[2], after[3])
	}
}
