package checkpoint_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/checkpoint"
)

const (
	testNS = "ns.servicebus.windows.net"
	testEH = "orders"
	testCG = "$default"
)

func newFileStore(t *testing.T) *checkpoint.FileStore {
	t.Helper()
	s, err := checkpoint.NewFileStore(t.TempDir(), nil)
	if err != nil {
		t.Fatalf("NewFileStore: %v", err)
	}
	return s
}

func ownership(pid, owner string, etag *azcore.ETag) azeventhubs.Ownership {
	return azeventhubs.Ownership{
		FullyQualifiedNamespace: testNS, EventHubName: testEH, ConsumerGroup: testCG,
		PartitionID: pid, OwnerID: owner, ETag: etag,
	}
}

func checkpointAt(pid string, seq int64, off string) azeventhubs.Checkpoint {
	return azeventhubs.Checkpoint{
		FullyQualifiedNamespace: testNS, EventHubName: testEH, ConsumerGroup: testCG,
		PartitionID: pid, SequenceNumber: &seq, Offset: &off,
	}
}

func TestFileStoreCheckpointRoundTrip(t *testing.T) {
	ctx := context.Background()
	s := newFileStore(t)

	got, err := s.ListCheckpoints(ctx, testNS, testEH, testCG, nil)
	if err != nil || len(got) != 0 {
		t.Fatalf("ListCheckpoints on an empty store = %v, %v; want none", got, err)
	}
	for _, c := range []azeventhubs.Checkpoint{checkpointAt("0", 5, "500"), checkpointAt("1", 9, "900"), checkpointAt("0", 6, "600")} {
		if err := s.SetCheckpoint(ctx, c, nil); err != nil {
			t.Fatalf("SetCheckpoint(%s): %v", c.PartitionID, err)
		}
	}
	got, err = s.ListCheckpoints(ctx, testNS, testEH, testCG, nil)
	if err != nil {
		t.Fatalf("ListCheckpoints: %v", err)
	}
	want := map[string][2]any{"0": {int64(6), "600"}, "1": {int64(9), "900"}}
	if len(got) != len(want) {
		t.Fatalf("ListCheckpoints = %d checkpoints, want %d", len(got), len(want))
	}
	for _, c := range got {
		w, ok := want[c.PartitionID]
		if !ok || *c.SequenceNumber != w[0] || *c.Offset != w[1] {
			t.Errorf("partition %s: got seq %d offset %s, want %v", c.PartitionID, *c.SequenceNumber, *c.Offset, w)
		}
		if c.FullyQualifiedNamespace != testNS || c.EventHubName != testEH || c.ConsumerGroup != testCG {
			t.Errorf("partition %s: names %q/%q/%q, want the caller's", c.PartitionID, c.FullyQualifiedNamespace, c.EventHubName, c.ConsumerGroup)
		}
	}

	// Other groups do not see it.
	other, err := s.ListCheckpoints(ctx, testNS, testEH, "other", nil)
	if err != nil || len(other) != 0 {
		t.Fatalf("ListCheckpoints(other group) = %v, %v; want none", other, err)
	}

	// The SDK's blob layout, with the blob metadata keys as JSON.
	b, err := os.ReadFile(filepath.Join(s.Dir(), testNS, testEH, testCG, "checkpoint", "0"))
	if err != nil {
		t.Fatalf("checkpoint file not in the blob layout: %v", err)
	}
	var fc checkpoint.FileCheckpoint
	if err := json.Unmarshal(b, &fc); err != nil || fc.SequenceNumber != 6 || fc.Offset != "600" {
		t.Fatalf("checkpoint file = %s (%v), want seq 6 offset 600", b, err)
	}
	// No temporary files are left behind.
	entries, _ := os.ReadDir(filepath.Join(s.Dir(), testNS, testEH, testCG, "checkpoint"))
	if len(entries) != 2 {
		t.Errorf("checkpoint directory holds %d entries, want 2", len(entries))
	}
}

func TestFileStoreRejects(t *testing.T) {
	ctx := context.Background()
	s := newFileStore(t)
	tests := []struct {
		name string
		cp   azeventhubs.Checkpoint
		want error
	}{
		{"no offset", func() azeventhubs.Checkpoint { c := checkpointAt("0", 1, ""); c.Offset = nil; return c }(), checkpoint.ErrIncompleteCheckpoint},
		{"no sequence number", func() azeventhubs.Checkpoint { c := checkpointAt("0", 1, "1"); c.SequenceNumber = nil; return c }(), checkpoint.ErrIncompleteCheckpoint},
		{"empty partition", checkpointAt("", 1, "1"), checkpoint.ErrInvalidName},
		{"traversal partition", checkpointAt("..", 1, "1"), checkpoint.ErrInvalidName},
		{"slash in partition", checkpointAt("a/b", 1, "1"), checkpoint.ErrInvalidName},
		{"dot file partition", checkpointAt(".0.lock", 1, "1"), checkpoint.ErrInvalidName},
		{"slash in hub", func() azeventhubs.Checkpoint { c := checkpointAt("0", 1, "1"); c.EventHubName = "../x"; return c }(), checkpoint.ErrInvalidName},
		{"empty group", func() azeventhubs.Checkpoint { c := checkpointAt("0", 1, "1"); c.ConsumerGroup = ""; return c }(), checkpoint.ErrInvalidName},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := s.SetCheckpoint(ctx, tt.cp, nil); !errors.Is(err, tt.want) {
				t.Fatalf("SetCheckpoint = %v, want %v", err, tt.want)
			}
		})
	}
	if _, err := s.ClaimOwnership(ctx, []azeventhubs.Ownership{ownership("../0", "a", nil)}, nil); !errors.Is(err, checkpoint.ErrInvalidName) {
		t.Fatalf("ClaimOwnership(../0) = %v, want ErrInvalidName", err)
	}
	if _, err := checkpoint.NewFileStore("", nil); err == nil {
		t.Fatal("NewFileStore(\"\") succeeded")
	}
}

func TestFileStoreClaimSemantics(t *testing.T) {
	ctx := context.Background()
	bogus := azcore.ETag("bogus")
	tests := []struct {
		name string
		// prepare claims partition 0 as "first" when set and returns its ETag.
		prepare bool
		claim   func(first *azcore.ETag) azeventhubs.Ownership
		wantWin bool
	}{
		{"create when absent", false, func(*azcore.ETag) azeventhubs.Ownership { return ownership("0", "b", nil) }, true},
		{"create when present loses", true, func(*azcore.ETag) azeventhubs.Ownership { return ownership("0", "b", nil) }, false},
		{"matching etag wins", true, func(e *azcore.ETag) azeventhubs.Ownership { return ownership("0", "b", e) }, true},
		{"stale etag loses", true, func(*azcore.ETag) azeventhubs.Ownership { return ownership("0", "b", &bogus) }, false},
		{"etag on absent partition loses", false, func(*azcore.ETag) azeventhubs.Ownership { return ownership("0", "b", &bogus) }, false},
		{"relinquish with matching etag", true, func(e *azcore.ETag) azeventhubs.Ownership { return ownership("0", "", e) }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newFileStore(t)
			var first *azcore.ETag
			prevOwner := ""
			if tt.prepare {
				got, err := s.ClaimOwnership(ctx, []azeventhubs.Ownership{ownership("0", "a", nil)}, nil)
				if err != nil || len(got) != 1 {
					t.Fatalf("first claim = %v, %v", got, err)
				}
				first, prevOwner = got[0].ETag, "a"
			}
			claim := tt.claim(first)
			got, err := s.ClaimOwnership(ctx, []azeventhubs.Ownership{claim}, nil)
			if err != nil {
				t.Fatalf("ClaimOwnership: %v", err)
			}
			if won := len(got) == 1; won != tt.wantWin {
				t.Fatalf("claim won = %v, want %v", won, tt.wantWin)
			}
			list, err := s.ListOwnership(ctx, testNS, testEH, testCG, nil)
			if err != nil {
				t.Fatalf("ListOwnership: %v", err)
			}
			wantOwner := prevOwner
			if tt.wantWin {
				wantOwner = claim.OwnerID
				o := got[0]
				if o.ETag == nil || (first != nil && *o.ETag == *first) || o.LastModifiedTime.IsZero() {
					t.Fatalf("won claim has ETag %v (previous %v), LastModifiedTime %v; want a new ETag and a time", o.ETag, first, o.LastModifiedTime)
				}
				if len(list) != 1 || *list[0].ETag != *o.ETag || !list[0].LastModifiedTime.Equal(o.LastModifiedTime) {
					t.Fatalf("ListOwnership = %+v, want the claim's ETag and time", list)
				}
			}
			if (len(list) == 0) != (wantOwner == "" && !tt.prepare && !tt.wantWin) {
				t.Fatalf("ListOwnership = %+v", list)
			}
			if len(list) == 1 && list[0].OwnerID != wantOwner {
				t.Fatalf("owner = %q, want %q", list[0].OwnerID, wantOwner)
			}
		})
	}
}

// TestFileStoreClaimRaceGoroutines has many goroutines claim the same
// partitions at once, first creating them (no ETag), then for several rounds
// with the ETag they all read: exactly one claim wins each partition each
// round, and the stored owner is the winner.
func TestFileStoreClaimRaceGoroutines(t *testing.T) {
	ctx := context.Background()
	s := newFileStore(t)
	const claimants, rounds = 16, 5
	partitions := []string{"0", "1", "2", "3"}

	etags := map[string]*azcore.ETag{} // nil: create round
	for round := range rounds + 1 {
		start := make(chan struct{})
		results := make([][]azeventhubs.Ownership, claimants)
		errs := make([]error, claimants)
		var wg sync.WaitGroup
		for c := range claimants {
			wg.Go(func() {
				var claims []azeventhubs.Ownership
				for _, p := range partitions {
					claims = append(claims, ownership(p, fmt.Sprintf("owner-%d", c), etags[p]))
				}
				<-start
				results[c], errs[c] = s.ClaimOwnership(ctx, claims, nil)
			})
		}
		close(start)
		wg.Wait()
		winners := map[string]string{}
		for c, res := range results {
			if errs[c] != nil {
				t.Fatalf("round %d claimant %d: %v", round, c, errs[c])
			}
			for _, o := range res {
				if prev, dup := winners[o.PartitionID]; dup {
					t.Fatalf("round %d partition %s won by %s and %s", round, o.PartitionID, prev, o.OwnerID)
				}
				winners[o.PartitionID] = o.OwnerID
				etags[o.PartitionID] = o.ETag
			}
		}
		checkWinners(t, s, round, partitions, winners, etags)
	}
}

// checkWinners asserts one winner per partition, matching the store.
func checkWinners(t *testing.T, s azeventhubs.CheckpointStore, round int, partitions []string, winners map[string]string, etags map[string]*azcore.ETag) {
	t.Helper()
	if len(winners) != len(partitions) {
		t.Fatalf("round %d: %d partitions claimed, want %d: %v", round, len(winners), len(partitions), winners)
	}
	list, err := s.ListOwnership(context.Background(), testNS, testEH, testCG, nil)
	if err != nil {
		t.Fatalf("ListOwnership: %v", err)
	}
	for _, o := range list {
		if o.OwnerID != winners[o.PartitionID] || *o.ETag != *etags[o.PartitionID] {
			t.Fatalf("round %d partition %s: stored owner %s etag %s, winner %s etag %s",
				round, o.PartitionID, o.OwnerID, *o.ETag, winners[o.PartitionID], *etags[o.PartitionID])
		}
	}
}
