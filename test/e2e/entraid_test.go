package e2e_test

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/ehsink/ehsink/emulator"
	"github.com/ehsink/ehsink/emulator/emulatortest"
	"github.com/ehsink/ehsink/internal/deltalog"
	"github.com/ehsink/ehsink/internal/parquettest"
	"github.com/ehsink/ehsink/internal/produce"
	"github.com/ehsink/ehsink/internal/testenv"
)

// TestEntraID: a configuration without a key. The source reaches the hub
// by its namespace, and the checkpoint store and the Parquet, Delta and
// Iceberg sinks reach Blob Storage by account_url, all with Entra ID:
// azidentity's DefaultAzureCredential in the ehsink process finds a
// managed identity (the App Service kind, served by the test) and sends
// its tokens to an HTTPS Azurite that checks them. Every event lands once
// in each sink, and the checkpoints are written. The same run without the
// identity's endpoint writes nothing (the tokens are what let it in).
func TestEntraID(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	const parts, events = 4, 200
	srv := emulatortest.Start(t, emulator.Config{Hubs: []emulator.HubConfig{{Name: "orders", Partitions: parts, ConsumerGroups: []string{"delta", "iceberg"}}},
		TLS: &emulator.TLSOptions{}})
	conn := srv.ConnectionString("orders")
	az := testenv.NewAzuriteOAuth(t)
	identity, issued := testenv.ManagedIdentity(t)
	// The child trusts Azurite's certificate and the emulator's authority.
	azCert, err := os.ReadFile(az.CertFile())
	if err != nil {
		t.Fatal(err)
	}
	certs := filepath.Join(t.TempDir(), "certs.pem")
	if err := os.WriteFile(certs, append(azCert, srv.CertificatePEM()...), 0o600); err != nil {
		t.Fatal(err)
	}
	env := append([]string{"SSL_CERT_FILE=" + certs}, identity...)

	producer, err := azeventhubs.NewProducerClientFromConnectionString(conn, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close(context.Background())
	if n, err := produce.Demo(ctx, producer, produce.DemoOptions{Count: events, Keys: 20}); err != nil || n != events {
		t.Fatalf("producer: %d, %v", n, err)
	}

	work := t.TempDir()
	cfg := filepath.Join(work, "connectors.yaml")
	blob := func(container string) string {
		return `{account_url: "` + az.BlobEndpoint() + `", container: ` + container + `}`
	}
	// The source reaches the hub by its namespace with Entra ID, over
	// AMQPS to the emulator's TLS listener (custom_endpoint, as a private
	// endpoint): the emulator takes any token when it has no keys, so what
	// shows the source used the identity is the token it asked for.
	source := func(group string) string {
		return `
    source:
      namespace: ehsink-e2e.servicebus.windows.net
      eventhub: orders
      custom_endpoint: "` + srv.TLSAddr() + `"
      consumer_group: ` + group + `
      start: earliest
      batch: {max_events: 50, max_wait: 200ms}
      load_balancing: {strategy: greedy, update_interval: 1s, ownership_expiration: 4s}
    checkpoint:
      blob: ` + blob("checkpoints")
	}
	columns := `
      columns:
        - {name: order_id, from: $.order_id, type: string, nullable: false}
        - {name: amount, from: $.amount, type: double}`
	if err := os.WriteFile(cfg, []byte(`
drain_timeout: 20s
connectors:
  - name: to-parquet`+source("$Default")+`
    sink:
      type: parquet
      blob: `+blob("parquet")+`
      max_age: 1s`+columns+`
  - name: to-delta`+source("delta")+`
    sink:
      type: delta
      table: orders
      blob: `+blob("delta")+`
      max_age: 1s`+columns+`
  - name: to-iceberg`+source("iceberg")+`
    sink:
      type: iceberg
      catalog: {type: sql, driver: sqlite, uri: "`+filepath.Join(work, "catalog.db")+`"}
      namespace: e2e
      table: orders
      warehouse: {blob: `+blob("iceberg")+`}
      max_age: 1s`+columns+`
`), 0o600); err != nil {
		t.Fatal(err)
	}

	// Without the identity, DefaultAzureCredential finds none: the
	// connectors fail or wait, and nothing lands.
	nothing := startReplica(t, "no-identity", cfg, "SSL_CERT_FILE="+certs, "IDENTITY_ENDPOINT=", "IDENTITY_HEADER=")
	waitUntil(t, ctx, "the replica without an identity to say it has no credential", func() bool {
		nothing.mu.Lock()
		defer nothing.mu.Unlock()
		for _, l := range nothing.logs {
			if strings.Contains(l, "DefaultAzureCredential") {
				return true
			}
		}
		return false
	})
	_ = nothing.cmd.Process.Kill()
	<-nothing.done
	keys := keyClients(t, az)
	if got := blobNames(t, ctx, keys("parquet"), ".parquet"); len(got) != 0 {
		t.Fatalf("without a managed identity, %d Parquet files landed: %v", len(got), got)
	}

	// The Delta and Iceberg sinks write into a container that exists (the
	// Parquet sink and the checkpoint store create theirs).
	for _, name := range []string{"delta", "iceberg"} {
		if _, err := keys(name).Create(ctx, nil); err != nil {
			t.Fatal(err)
		}
	}
	r := startReplica(t, "replica", cfg, env...)
	waitUntil(t, ctx, "every event in the Parquet files, the Delta table and the Iceberg table", func() bool {
		return len(parquetIDs(t, ctx, keys("parquet"))) >= events && len(deltaIDs(t, ctx, keys("delta"))) >= events &&
			icebergRecords(t, ctx, keys("iceberg")) >= events
	}, r)
	if err := r.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	<-r.done
	if r.err != nil {
		t.Fatalf("ehsink run exited with %v after SIGINT", r.err)
	}
	for sink, ids := range map[string][]string{"parquet": parquetIDs(t, ctx, keys("parquet")), "delta": deltaIDs(t, ctx, keys("delta"))} {
		seen := map[string]int{}
		for _, id := range ids {
			seen[id]++
		}
		for id, n := range seen {
			if n != 1 {
				t.Errorf("%s: order %s written %d times", sink, id, n)
			}
		}
		if len(seen) != events {
			t.Errorf("%s: %d distinct orders, want %d", sink, len(seen), events)
		}
	}
	if n := icebergRecords(t, ctx, keys("iceberg")); n != events {
		t.Errorf("iceberg: the current snapshot counts %d records, want %d", n, events)
	}
	cps := blobNames(t, ctx, keys("checkpoints"), "")
	has := func(part string) bool {
		return slices.ContainsFunc(cps, func(n string) bool { return strings.Contains(n, part) })
	}
	if !has("/checkpoint/") || !has("/ownership/") {
		t.Errorf("checkpoint container holds %v: want ownership and checkpoint blobs", cps)
	}
	for _, resource := range []string{"https://storage.azure.com", "https://eventhubs.azure.net"} {
		if issued(resource) == 0 {
			t.Errorf("the managed identity issued no token for %s", resource)
		}
	}
}

// keyClients returns, per container, a client of az with its shared key,
// trusting its certificate: the test's own view of what landed.
func keyClients(t *testing.T, az *testenv.AzuriteInstance) func(name string) *container.Client {
	return func(name string) *container.Client {
		c, err := container.NewClientFromConnectionString(az.ConnectionString(), name,
			&container.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: az.HTTPClient(t)}})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
}

// blobNames lists the blobs of c whose names end in suffix; a missing
// container has none.
func blobNames(t *testing.T, ctx context.Context, c *container.Client, suffix string) []string {
	t.Helper()
	var names []string
	pager := c.NewListBlobsFlatPager(nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			if strings.Contains(err.Error(), "ContainerNotFound") {
				return nil
			}
			t.Fatalf("list: %v", err)
		}
		for _, b := range page.Segment.BlobItems {
			if strings.HasSuffix(*b.Name, suffix) {
				names = append(names, *b.Name)
			}
		}
	}
	return names
}

// download reads one blob whole.
func download(t *testing.T, ctx context.Context, c *container.Client, name string) []byte {
	t.Helper()
	resp, err := c.NewBlobClient(name).DownloadStream(ctx, nil)
	if err != nil {
		t.Fatalf("download %s: %v", name, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("download %s: %v", name, err)
	}
	return b
}

// orderIDs reads the order_id column of a Parquet file.
func orderIDs(t *testing.T, data []byte, name string) []string {
	t.Helper()
	tb, err := parquettest.Read(data)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	ids := make([]string, 0, len(tb.Rows))
	for _, r := range tb.Rows {
		ids = append(ids, r["order_id"].(string))
	}
	return ids
}

// parquetIDs reads the orders of every committed Parquet file of c.
func parquetIDs(t *testing.T, ctx context.Context, c *container.Client) []string {
	t.Helper()
	var ids []string
	for _, name := range blobNames(t, ctx, c, ".parquet") {
		ids = append(ids, orderIDs(t, download(t, ctx, c, name), name)...)
	}
	return ids
}

// deltaIDs reads the orders of the Delta table "orders" of c, as its log
// says: the data files of its latest version.
func deltaIDs(t *testing.T, ctx context.Context, c *container.Client) []string {
	t.Helper()
	if len(blobNames(t, ctx, c, ".json")) == 0 {
		return nil
	}
	snap, err := deltalog.New(deltalog.NewBlobStore(c, "delta", "orders")).Load(ctx)
	if err != nil {
		t.Fatalf("delta log: %v", err)
	}
	var ids []string
	for _, add := range snap.SortedFiles() {
		name := path.Join("orders", add.Path)
		ids = append(ids, orderIDs(t, download(t, ctx, c, name), name)...)
	}
	return ids
}

// icebergRecords is the total-records of the current snapshot of the
// Iceberg table e2e.orders in c, as its newest metadata file says (0
// before the first commit).
func icebergRecords(t *testing.T, ctx context.Context, c *container.Client) int64 {
	t.Helper()
	var files []string
	for _, name := range blobNames(t, ctx, c, ".metadata.json") {
		if strings.HasPrefix(name, "e2e.db/orders/metadata/") {
			files = append(files, name)
		}
	}
	if len(files) == 0 {
		return 0
	}
	slices.Sort(files) // NNNNN-uuid.metadata.json: the version first
	var md struct {
		Current   *int64 `json:"current-snapshot-id"`
		Snapshots []struct {
			ID      int64             `json:"snapshot-id"`
			Summary map[string]string `json:"summary"`
		} `json:"snapshots"`
	}
	name := files[len(files)-1]
	if err := json.Unmarshal(download(t, ctx, c, name), &md); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	for _, s := range md.Snapshots {
		if md.Current != nil && s.ID == *md.Current {
			n, err := strconv.ParseInt(s.Summary["total-records"], 10, 64)
			if err != nil {
				t.Fatalf("%s: total-records %q", name, s.Summary["total-records"])
			}
			return n
		}
	}
	return 0
}
