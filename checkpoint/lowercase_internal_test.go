package checkpoint

import (
	"context"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
)

// racingStore is a FileStore on which another replica writes a lowercase
// checkpoint right after Lowercase has listed the lowercase names and before
// it migrates the as-written one.
type racingStore struct {
	*FileStore
	newer azeventhubs.Checkpoint
}

func (r *racingStore) ListCheckpoints(ctx context.Context, ns, eh, cg string, o *azeventhubs.ListCheckpointsOptions) ([]azeventhubs.Checkpoint, error) {
	if cg != strings.ToLower(cg) && r.newer.PartitionID != "" {
		if err := r.FileStore.SetCheckpoint(ctx, r.newer, nil); err != nil {
			return nil, err
		}
		r.newer = azeventhubs.Checkpoint{}
	}
	return r.FileStore.ListCheckpoints(ctx, ns, eh, cg, o)
}

// TestLowercaseMigrationNeverMovesBack: the migration is a create-if-absent,
// so the newer lowercase checkpoint written in between survives and is what
// ListCheckpoints returns.
func TestLowercaseMigrationNeverMovesBack(t *testing.T) {
	ctx := context.Background()
	fs, err := NewFileStore(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	seq, off := int64(10), "1000"
	if err := fs.SetCheckpoint(ctx, azeventhubs.Checkpoint{FullyQualifiedNamespace: "ns", EventHubName: "hub", ConsumerGroup: "$Default", PartitionID: "0", SequenceNumber: &seq, Offset: &off}, nil); err != nil {
		t.Fatal(err)
	}
	newSeq, newOff := int64(99), "9900"
	rs := &racingStore{FileStore: fs, newer: azeventhubs.Checkpoint{FullyQualifiedNamespace: "ns", EventHubName: "hub", ConsumerGroup: "$default", PartitionID: "0", SequenceNumber: &newSeq, Offset: &newOff}}

	got, err := Lowercase(rs, nil).ListCheckpoints(ctx, "ns", "hub", "$Default", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || *got[0].SequenceNumber != 99 || got[0].ConsumerGroup != "$Default" {
		t.Fatalf("ListCheckpoints = %+v, want partition 0 at 99 (the newer lowercase checkpoint) with the caller's names", got)
	}
	stored, _ := fs.ListCheckpoints(ctx, "ns", "hub", "$default", nil)
	if len(stored) != 1 || *stored[0].SequenceNumber != 99 {
		t.Fatalf("lowercase checkpoint = %+v, want 99 kept", stored)
	}
}

func TestFileStoreCreateCheckpoint(t *testing.T) {
	ctx := context.Background()
	fs, err := NewFileStore(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	cp := func(seq int64) azeventhubs.Checkpoint {
		off := "x"
		return azeventhubs.Checkpoint{FullyQualifiedNamespace: "ns", EventHubName: "hub", ConsumerGroup: "cg", PartitionID: "0", SequenceNumber: &seq, Offset: &off}
	}
	for i, tt := range []struct {
		seq         int64
		wantCreated bool
	}{{1, true}, {2, false}} {
		created, err := fs.createCheckpoint(ctx, cp(tt.seq))
		if err != nil || created != tt.wantCreated {
			t.Fatalf("createCheckpoint #%d = %v, %v; want %v", i+1, created, err, tt.wantCreated)
		}
	}
	got, _ := fs.ListCheckpoints(ctx, "ns", "hub", "cg", nil)
	if len(got) != 1 || *got[0].SequenceNumber != 1 {
		t.Fatalf("checkpoint = %+v, want the first one kept", got)
	}
}

// listCounter is a FileStore that counts the listings of the as-written
// (mixed-case) names.
type listCounter struct {
	*FileStore
	ownership, checkpoints int
}

func (c *listCounter) ListOwnership(ctx context.Context, ns, eh, cg string, o *azeventhubs.ListOwnershipOptions) ([]azeventhubs.Ownership, error) {
	if cg != strings.ToLower(cg) {
		c.ownership++
	}
	return c.FileStore.ListOwnership(ctx, ns, eh, cg, o)
}

func (c *listCounter) ListCheckpoints(ctx context.Context, ns, eh, cg string, o *azeventhubs.ListCheckpointsOptions) ([]azeventhubs.Checkpoint, error) {
	if cg != strings.ToLower(cg) {
		c.checkpoints++
	}
	return c.FileStore.ListCheckpoints(ctx, ns, eh, cg, o)
}

// TestLowercaseStopsListingAsWritten: with the SDK's default consumer
// group "$Default", the as-written names are listed only while they hold
// something the lowercase ones lack: an ownership not yet claimed under the
// lowercase name, a checkpoint not yet migrated. After that, rounds list
// once, not twice.
func TestLowercaseStopsListingAsWritten(t *testing.T) {
	ctx := context.Background()
	fs, err := NewFileStore(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	const ns, hub, group = "ns", "hub", "$Default"
	seq, off := int64(10), "1000"
	if err := fs.SetCheckpoint(ctx, azeventhubs.Checkpoint{FullyQualifiedNamespace: ns, EventHubName: hub, ConsumerGroup: group, PartitionID: "0", SequenceNumber: &seq, Offset: &off}, nil); err != nil {
		t.Fatal(err)
	}
	old := azeventhubs.Ownership{FullyQualifiedNamespace: ns, EventHubName: hub, ConsumerGroup: group, PartitionID: "0", OwnerID: "old"}
	if _, err := fs.ClaimOwnership(ctx, []azeventhubs.Ownership{old}, nil); err != nil {
		t.Fatal(err)
	}
	c := &listCounter{FileStore: fs}
	lc := Lowercase(c, nil)

	// The as-written ownership is still needed until it is claimed anew.
	for range 2 {
		list, err := lc.ListOwnership(ctx, ns, hub, group, nil)
		if err != nil || len(list) != 1 || list[0].OwnerID != "old" {
			t.Fatalf("ListOwnership = %+v, %v; want old's as-written ownership", list, err)
		}
	}
	if c.ownership != 2 {
		t.Fatalf("as-written ownership listed %d times in 2 rounds before the claim, want 2", c.ownership)
	}
	claim := old
	claim.OwnerID = "new"
	if won, err := lc.ClaimOwnership(ctx, []azeventhubs.Ownership{claim}, nil); err != nil || len(won) != 1 {
		t.Fatalf("claim: %+v, %v", won, err)
	}
	for range 3 {
		list, err := lc.ListOwnership(ctx, ns, hub, group, nil)
		if err != nil || len(list) != 1 || list[0].OwnerID != "new" {
			t.Fatalf("ListOwnership = %+v, %v; want new's lowercase ownership", list, err)
		}
	}
	if c.ownership != 3 {
		t.Errorf("as-written ownership listed %d times in all, want 3 (2 before the claim, 1 after it)", c.ownership)
	}

	// The first checkpoint listing migrates; the next ones need not look.
	for range 3 {
		cps, err := lc.ListCheckpoints(ctx, ns, hub, group, nil)
		if err != nil || len(cps) != 1 || *cps[0].SequenceNumber != 10 {
			t.Fatalf("ListCheckpoints = %+v, %v; want partition 0 at 10", cps, err)
		}
	}
	if c.checkpoints != 1 {
		t.Errorf("as-written checkpoints listed %d times in 3 listings, want 1 (the migration)", c.checkpoints)
	}
}
