package checkpoint_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2/checkpoints"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/ehsink/ehsink/checkpoint"
	"github.com/ehsink/ehsink/internal/secret"
	"github.com/ehsink/ehsink/internal/testenv"
)

// storeKind builds a fresh, empty store of one kind, and the SDK's own blob
// store over the same container (nil for the file store).
type storeKind struct {
	name string
	new  func(t *testing.T) (azeventhubs.CheckpointStore, *checkpoints.BlobStore)
}

var storeKinds = []storeKind{
	{"file", func(t *testing.T) (azeventhubs.CheckpointStore, *checkpoints.BlobStore) {
		return newFileStore(t), nil
	}},
	{"blob", func(t *testing.T) (azeventhubs.CheckpointStore, *checkpoints.BlobStore) {
		s, raw := newBlobStore(t)
		return s, raw
	}},
}

// newBlobStore returns a store on a new container of the shared Azurite,
// and the SDK's own store on the same container.
func newBlobStore(t *testing.T) (*checkpoint.BlobStore, *checkpoints.BlobStore) {
	t.Helper()
	az := testenv.Azurite(t)
	name := az.ContainerName(t)
	s, err := checkpoint.NewBlobStore(context.Background(), checkpoint.BlobOptions{
		Connection: secret.String(az.ConnectionString()),
		Container:  name,
	})
	if err != nil {
		t.Fatalf("NewBlobStore: %v", err)
	}
	cc, err := container.NewClientFromConnectionString(az.ConnectionString(), name, nil)
	if err != nil {
		t.Fatalf("container client: %v", err)
	}
	raw, err := checkpoints.NewBlobStore(cc, nil)
	if err != nil {
		t.Fatalf("SDK blob store: %v", err)
	}
	return s, raw
}

// TestStoreClaimSemantics runs the same claims against the file store and
// the SDK's blob store on Azurite: the file store must decide every claim
// as the SDK's store does.
func TestStoreClaimSemantics(t *testing.T) {
	ctx := context.Background()
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			s, _ := kind.new(t)
			claim := func(o azeventhubs.Ownership) []azeventhubs.Ownership {
				t.Helper()
				got, err := s.ClaimOwnership(ctx, []azeventhubs.Ownership{o}, nil)
				if err != nil {
					t.Fatalf("ClaimOwnership(%s by %q): %v", o.PartitionID, o.OwnerID, err)
				}
				return got
			}
			first := claim(ownership("0", "a", nil))
			if len(first) != 1 || first[0].ETag == nil || first[0].LastModifiedTime.IsZero() {
				t.Fatalf("create claim = %+v, want one ownership with ETag and time", first)
			}
			if got := claim(ownership("0", "b", nil)); len(got) != 0 {
				t.Fatalf("second create claim won: %+v", got)
			}
			second := claim(ownership("0", "b", first[0].ETag))
			if len(second) != 1 || etagValue(second[0].ETag) == etagValue(first[0].ETag) {
				t.Fatalf("claim with current ETag = %+v, want a win with a new ETag", second)
			}
			if got := claim(ownership("0", "c", first[0].ETag)); len(got) != 0 {
				t.Fatalf("claim with stale ETag won: %+v", got)
			}
			relinquished := claim(ownership("0", "", second[0].ETag))
			if len(relinquished) != 1 {
				t.Fatalf("relinquish claim lost")
			}
			list, err := s.ListOwnership(ctx, testNS, testEH, testCG, nil)
			if err != nil {
				t.Fatalf("ListOwnership: %v", err)
			}
			if len(list) != 1 || list[0].OwnerID != "" || etagValue(list[0].ETag) != etagValue(relinquished[0].ETag) || list[0].PartitionID != "0" {
				t.Fatalf("ListOwnership = %+v, want partition 0 relinquished with the last ETag", list)
			}
			// Mixed batch: losers are left out, winners kept, no error.
			got, err := s.ClaimOwnership(ctx, []azeventhubs.Ownership{
				ownership("0", "d", first[0].ETag), ownership("1", "d", nil), ownership("0", "e", relinquished[0].ETag),
			}, nil)
			if err != nil || len(got) != 2 || got[0].PartitionID != "1" || got[1].OwnerID != "e" {
				t.Fatalf("mixed claims = %+v, %v; want partition 1 by d and 0 by e", got, err)
			}
		})
	}
}

// TestBlobStoreCheckpointsReadBySDK proves ehsink's blob checkpoints have
// the standard layout and metadata: the SDK's own store reads them back.
func TestBlobStoreCheckpointsReadBySDK(t *testing.T) {
	ctx := context.Background()
	s, raw := newBlobStore(t)
	for _, c := range []azeventhubs.Checkpoint{checkpointAt("0", 41, "4100"), checkpointAt("3", 7, "700"), checkpointAt("0", 42, "4200")} {
		if err := s.SetCheckpoint(ctx, c, nil); err != nil {
			t.Fatalf("SetCheckpoint: %v", err)
		}
	}
	got, err := raw.ListCheckpoints(ctx, testNS, testEH, testCG, nil)
	if err != nil {
		t.Fatalf("SDK ListCheckpoints: %v", err)
	}
	want := map[string]int64{"0": 42, "3": 7}
	if len(got) != len(want) {
		t.Fatalf("SDK sees %d checkpoints, want %d", len(got), len(want))
	}
	for _, c := range got {
		if *c.SequenceNumber != want[c.PartitionID] || *c.Offset != strconv.FormatInt(want[c.PartitionID]*100, 10) {
			t.Errorf("partition %s: seq %d offset %s", c.PartitionID, *c.SequenceNumber, *c.Offset)
		}
	}
	blobName := testNS + "/" + testEH + "/" + testCG + "/checkpoint/0"
	props, err := s.Container().NewBlobClient(blobName).GetProperties(ctx, nil)
	if err != nil {
		t.Fatalf("blob %s: %v", blobName, err)
	}
	var seq string
	for k, v := range props.Metadata { // the SDK canonicalizes header-borne keys
		if strings.EqualFold(k, "sequencenumber") && v != nil {
			seq = *v
		}
	}
	if seq != "42" {
		t.Errorf("blob %s metadata sequencenumber = %q, want 42", blobName, seq)
	}

	incomplete := checkpointAt("1", 1, "")
	incomplete.Offset = nil
	if err := s.SetCheckpoint(ctx, incomplete, nil); err == nil {
		t.Fatal("SetCheckpoint without an offset succeeded; the SDK could not list it back")
	}
	if _, err := raw.ListCheckpoints(ctx, testNS, testEH, testCG, nil); err != nil {
		t.Fatalf("SDK ListCheckpoints after the refused write: %v", err)
	}
}

func TestNewBlobStoreCreatesContainer(t *testing.T) {
	az := testenv.Azurite(t)
	ctx := context.Background()
	name := az.ContainerName(t)
	opts := checkpoint.BlobOptions{Connection: secret.String(az.ConnectionString()), Container: name}
	for i := range 2 { // creates, then finds it
		if _, err := checkpoint.NewBlobStore(ctx, opts); err != nil {
			t.Fatalf("NewBlobStore #%d: %v", i+1, err)
		}
	}
	cc, _ := container.NewClientFromConnectionString(az.ConnectionString(), name, nil)
	if _, err := cc.GetProperties(ctx, nil); err != nil {
		t.Fatalf("container %s not created: %v", name, err)
	}
}

// TestBlobStoreWithCredential: a store given an account URL and a
// Credential takes its tokens to a Blob service that checks them: it
// creates its container and keeps ownership there; a credential for
// another audience is refused.
func TestBlobStoreWithCredential(t *testing.T) {
	az := testenv.NewAzuriteOAuth(t)
	ctx := context.Background()
	opts := func(audience string) checkpoint.BlobOptions {
		return checkpoint.BlobOptions{AccountURL: az.BlobEndpoint(), Container: az.ContainerName(t),
			Credential:    testenv.Credential(audience),
			ClientOptions: &container.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: az.HTTPClient(t)}}}
	}
	store, err := checkpoint.NewBlobStore(ctx, opts("https://storage.azure.com"))
	if err != nil {
		t.Fatalf("NewBlobStore with a storage token: %v", err)
	}
	claimed, err := store.ClaimOwnership(ctx, []azeventhubs.Ownership{{FullyQualifiedNamespace: testNS, EventHubName: testEH,
		ConsumerGroup: testCG, PartitionID: "0", OwnerID: "a"}}, nil)
	if err != nil || len(claimed) != 1 {
		t.Fatalf("ClaimOwnership with a storage token: %v, %v", claimed, err)
	}
	if _, err := checkpoint.NewBlobStore(ctx, opts("https://vault.azure.net")); err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("NewBlobStore with a token for another audience: %v, want 403", err)
	}
}

func TestNewBlobStoreConfigErrors(t *testing.T) {
	const key = "c2VjcmV0LWtleS12YWx1ZQ=="
	tests := []struct {
		name string
		opts checkpoint.BlobOptions
	}{
		{"no container", checkpoint.BlobOptions{Connection: "UseDevelopmentStorage=true"}},
		{"no account", checkpoint.BlobOptions{Container: "c"}},
		{"both", checkpoint.BlobOptions{Container: "c", Connection: "UseDevelopmentStorage=true", AccountURL: "https://a.blob.core.windows.net"}},
		{"bad connection string", checkpoint.BlobOptions{Container: "c", Connection: secret.String("AccountKey=" + key + ";nonsense")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := checkpoint.NewBlobStore(context.Background(), tt.opts)
			if err == nil {
				t.Fatal("NewBlobStore succeeded")
			}
			if strings.Contains(err.Error(), key) {
				t.Fatalf("error leaks the account key: %v", err)
			}
		})
	}
}

// etagValue strips the quotes Blob Storage puts around ETags in response
// headers but not in listings (the SDK passes both back as they came, and
// the service accepts both in If-Match).
func etagValue(e *azcore.ETag) string {
	if e == nil {
		return "<nil>"
	}
	return strings.Trim(string(*e), `"`)
}
