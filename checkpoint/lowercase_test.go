package checkpoint_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/checkpoint"
)

// Names as a Go program configures them, and as the other SDKs store them.
const (
	mixedNS, mixedEH, mixedCG = "MyNS.servicebus.windows.net", "Orders", "$Default"
	lowerNS, lowerEH, lowerCG = "myns.servicebus.windows.net", "orders", "$default"
)

func at(ns, eh, cg, pid string, seq int64, off string) azeventhubs.Checkpoint {
	return azeventhubs.Checkpoint{FullyQualifiedNamespace: ns, EventHubName: eh, ConsumerGroup: cg, PartitionID: pid, SequenceNumber: &seq, Offset: &off}
}

func positions(t *testing.T, cps []azeventhubs.Checkpoint) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, c := range cps {
		s := "seq=nil"
		if c.SequenceNumber != nil {
			s = "seq=" + itoa(*c.SequenceNumber)
		}
		if c.Offset != nil {
			s += " off=" + *c.Offset
		}
		m[c.PartitionID] = s
	}
	return m
}

func itoa(i int64) string { return strconv.FormatInt(i, 10) }

// TestLowercaseMigratesCheckpoints: a checkpoint the Go SDK wrote under
// "$Default" (the raw SDK BlobStore on Azurite, or the unwrapped file
// store) is read through Lowercase when no lowercase one exists, written
// under the lowercase names, and never preferred over a lowercase one.
func TestLowercaseMigratesCheckpoints(t *testing.T) {
	ctx := context.Background()
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			store, sdk := kind.new(t)
			var raw azeventhubs.CheckpointStore = store // writes names as given
			if sdk != nil {
				raw = sdk // the Go SDK itself wrote the old checkpoints
			}
			for _, c := range []azeventhubs.Checkpoint{
				at(mixedNS, mixedEH, mixedCG, "0", 10, "1000"),
				at(mixedNS, mixedEH, mixedCG, "1", 11, "1100"),
				at(lowerNS, lowerEH, lowerCG, "1", 50, "5000"), // written since by another SDK
			} {
				if err := raw.SetCheckpoint(ctx, c, nil); err != nil {
					t.Fatalf("seed: %v", err)
				}
			}

			lc := checkpoint.Lowercase(store, nil)
			got, err := lc.ListCheckpoints(ctx, mixedNS, mixedEH, mixedCG, nil)
			if err != nil {
				t.Fatalf("ListCheckpoints: %v", err)
			}
			want := map[string]string{"0": "seq=10 off=1000", "1": "seq=50 off=5000"}
			assertPositions(t, "through Lowercase", positions(t, got), want)
			for _, c := range got {
				if c.FullyQualifiedNamespace != mixedNS || c.EventHubName != mixedEH || c.ConsumerGroup != mixedCG {
					t.Errorf("partition %s returned with names %s/%s/%s, want the caller's", c.PartitionID, c.FullyQualifiedNamespace, c.EventHubName, c.ConsumerGroup)
				}
			}

			lower, err := raw.ListCheckpoints(ctx, lowerNS, lowerEH, lowerCG, nil)
			if err != nil {
				t.Fatalf("raw lowercase ListCheckpoints: %v", err)
			}
			assertPositions(t, "lowercase names after migration", positions(t, lower), want)

			if err := lc.SetCheckpoint(ctx, at(mixedNS, mixedEH, mixedCG, "0", 20, "2000"), nil); err != nil {
				t.Fatalf("SetCheckpoint: %v", err)
			}
			lower, _ = raw.ListCheckpoints(ctx, lowerNS, lowerEH, lowerCG, nil)
			assertPositions(t, "lowercase names after SetCheckpoint", positions(t, lower),
				map[string]string{"0": "seq=20 off=2000", "1": "seq=50 off=5000"})
			legacy, _ := raw.ListCheckpoints(ctx, mixedNS, mixedEH, mixedCG, nil)
			assertPositions(t, "as-written names left in place", positions(t, legacy),
				map[string]string{"0": "seq=10 off=1000", "1": "seq=11 off=1100"})
			got, _ = lc.ListCheckpoints(ctx, mixedNS, mixedEH, mixedCG, nil)
			assertPositions(t, "through Lowercase after SetCheckpoint", positions(t, got),
				map[string]string{"0": "seq=20 off=2000", "1": "seq=50 off=5000"})
		})
	}
}

// TestLowercaseOwnershipFallback: an ownership under the as-written names
// is listed (so load balancing sees the owner) with a nil ETag, and the
// claim built from it creates the lowercase ownership for exactly one
// claimant.
func TestLowercaseOwnershipFallback(t *testing.T) {
	ctx := context.Background()
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			store, sdk := kind.new(t)
			var raw azeventhubs.CheckpointStore = store
			if sdk != nil {
				raw = sdk
			}
			old := azeventhubs.Ownership{FullyQualifiedNamespace: mixedNS, EventHubName: mixedEH, ConsumerGroup: mixedCG, PartitionID: "0", OwnerID: "old"}
			if got, err := raw.ClaimOwnership(ctx, []azeventhubs.Ownership{old}, nil); err != nil || len(got) != 1 {
				t.Fatalf("seed ownership: %v, %v", got, err)
			}

			lc := checkpoint.Lowercase(store, nil)
			list, err := lc.ListOwnership(ctx, mixedNS, mixedEH, mixedCG, nil)
			if err != nil {
				t.Fatalf("ListOwnership: %v", err)
			}
			if len(list) != 1 || list[0].OwnerID != "old" || list[0].ETag != nil || list[0].LastModifiedTime.IsZero() ||
				list[0].ConsumerGroup != mixedCG || list[0].EventHubName != mixedEH {
				t.Fatalf("ListOwnership = %+v, want the as-written ownership of old, caller's names, no ETag", list)
			}

			var winners []string
			for _, owner := range []string{"x", "y"} {
				claim := list[0]
				claim.OwnerID = owner
				won, err := lc.ClaimOwnership(ctx, []azeventhubs.Ownership{claim}, nil)
				if err != nil {
					t.Fatalf("ClaimOwnership by %s: %v", owner, err)
				}
				for _, o := range won {
					if o.ConsumerGroup != mixedCG || o.ETag == nil {
						t.Fatalf("claim result %+v: want caller's names and an ETag", o)
					}
					winners = append(winners, o.OwnerID)
				}
			}
			if len(winners) != 1 || winners[0] != "x" {
				t.Fatalf("winners = %v, want exactly x", winners)
			}

			list, _ = lc.ListOwnership(ctx, mixedNS, mixedEH, mixedCG, nil)
			if len(list) != 1 || list[0].OwnerID != "x" || list[0].ETag == nil {
				t.Fatalf("ListOwnership after the claim = %+v, want x with an ETag", list)
			}
			lower, _ := raw.ListOwnership(ctx, lowerNS, lowerEH, lowerCG, nil)
			if len(lower) != 1 || lower[0].OwnerID != "x" {
				t.Fatalf("lowercase ownership = %+v, want x", lower)
			}
			// Renewal with the listed ETag keeps working under the lowercase name.
			renew := list[0]
			if won, err := lc.ClaimOwnership(ctx, []azeventhubs.Ownership{renew}, nil); err != nil || len(won) != 1 {
				t.Fatalf("renewal = %+v, %v; want a win", won, err)
			}
		})
	}
}

// TestLowercaseAlreadyLowercase: with lowercase names there is no second
// listing and nothing to migrate.
func TestLowercaseAlreadyLowercase(t *testing.T) {
	ctx := context.Background()
	s := newFileStore(t)
	lc := checkpoint.Lowercase(s, nil)
	if err := lc.SetCheckpoint(ctx, at(lowerNS, lowerEH, lowerCG, "0", 1, "100"), nil); err != nil {
		t.Fatal(err)
	}
	got, err := lc.ListCheckpoints(ctx, lowerNS, lowerEH, lowerCG, nil)
	if err != nil {
		t.Fatal(err)
	}
	assertPositions(t, "lowercase", positions(t, got), map[string]string{"0": "seq=1 off=100"})
}

func assertPositions(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: got %v, want %v", what, got, want)
		return
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: partition %s = %q, want %q (all: %v)", what, k, got[k], v, got)
		}
	}
}

// TestJSNamespace: emulator endpoints lose their port, as the JavaScript
// SDK names them; real namespaces are only lowercased.
func TestJSNamespace(t *testing.T) {
	for in, want := range map[string]string{
		mixedNS:                          lowerNS,
		"127.0.0.1:5672":                 "127.0.0.1",
		"LocalHost:41234":                "localhost",
		"127.0.0.1":                      "127.0.0.1",
		"emulator":                       "emulator",
		"[::1]:5672":                     "::1",
		"ns.servicebus.windows.net:5671": "ns.servicebus.windows.net",
	} {
		if got := checkpoint.JSNamespace(in); got != want {
			t.Errorf("JSNamespace(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestLowercaseEmulatorNamespace: checkpoints under a namespace the Go SDK
// names "127.0.0.1:PORT" are written there (where the Go SDK and KEDA
// read them) and copied under "127.0.0.1", where the JavaScript SDK's
// checkpoint store reads them; a real namespace is written once, as before.
func TestLowercaseEmulatorNamespace(t *testing.T) {
	ctx := context.Background()
	const goNS, jsNS = "127.0.0.1:41234", "127.0.0.1"
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			store, sdk := kind.new(t)
			var raw azeventhubs.CheckpointStore = store
			if sdk != nil {
				raw = sdk
			}
			lc := checkpoint.Lowercase(store, nil)
			for _, ns := range []string{goNS, mixedNS} {
				if err := lc.SetCheckpoint(ctx, at(ns, mixedEH, mixedCG, "0", 3, "300"), nil); err != nil {
					t.Fatalf("SetCheckpoint: %v", err)
				}
			}
			want := map[string]string{"0": "seq=3 off=300"}
			for _, ns := range []string{goNS, jsNS, lowerNS} {
				got, err := raw.ListCheckpoints(ctx, ns, lowerEH, lowerCG, nil)
				if err != nil {
					t.Fatalf("raw ListCheckpoints: %v", err)
				}
				assertPositions(t, "namespace "+ns, positions(t, got), want)
			}
		})
	}
}
