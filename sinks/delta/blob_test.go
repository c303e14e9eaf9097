package delta

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/ehsink/ehsink/internal/connstr"
	"github.com/ehsink/ehsink/internal/secret"
	"github.com/ehsink/ehsink/internal/testenv"
	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/sinks/sinktest"
)

// blobTable is a table in a fresh container of the shared Azurite.
type blobTable struct {
	conn, container string
	client          *container.Client
}

func newBlobTable(t *testing.T) *blobTable {
	t.Helper()
	az := testenv.Azurite(t)
	b := &blobTable{conn: az.ConnectionString(), container: az.ContainerName(t)}
	var err error
	if b.client, err = connstr.ContainerClient(b.conn, b.container, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := b.client.Create(testCtx(t), nil); err != nil {
		t.Fatal(err)
	}
	return b
}

func (b *blobTable) sink(t *testing.T) *sink {
	t.Helper()
	return newTestSink(t, "lake/orders", func(c *sinkConfig) {
		c.Blob = &blobConfig{Connection: secret.String(b.conn), Container: b.container}
	})
}

// download copies the table's blobs to a local folder, where the local
// readers of the tests read it.
func (b *blobTable) download(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	prefix := "lake/orders/"
	pager := b.client.NewListBlobsFlatPager(&container.ListBlobsFlatOptions{Prefix: &prefix})
	for pager.More() {
		page, err := pager.NextPage(testCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range page.Segment.BlobItems {
			resp, err := b.client.NewBlobClient(*it.Name).DownloadStream(testCtx(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			data, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(dir, filepath.FromSlash(strings.TrimPrefix(*it.Name, prefix)))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

// TestBlobConformance runs the conformance kit on tables in Azurite.
func TestBlobConformance(t *testing.T) {
	var mu sync.Mutex
	tables := map[string]*blobTable{}
	table := func(t *testing.T) *blobTable {
		mu.Lock()
		defer mu.Unlock()
		name := strings.SplitN(t.Name(), "/", 3)[1]
		if tables[name] == nil {
			tables[name] = newBlobTable(t)
		}
		return tables[name]
	}
	sinktest.Run(t, sinktest.Harness{
		New: func(t *testing.T) sinks.Sink { return table(t).sink(t) },
		Committed: func(t *testing.T, partition string) []int64 {
			return seqsOf(readRows(t, table(t).download(t)))[partition]
		},
		BadEvent:        badEvent,
		Fencing:         true,
		InterruptCommit: interruptCommit,
	})
}

// TestBlobRace has two sinks race for versions of one table in Azurite,
// whose answer to a create-only upload of an existing blob is 409 (Azure
// answers 412): both must read it as a lost race and commit next.
func TestBlobRace(t *testing.T) {
	b := newBlobTable(t)
	raceFlushes(t, []*sink{b.sink(t), b.sink(t)}, 50)
	dir := b.download(t)
	for _, p := range []string{"0", "1", "2", "3"} {
		wantOnce(t, dir, p, 0, 49)
	}
	// A stale owner on Blob is fenced too.
	w, _, _ := b.sink(t).Open(testCtx(t), "0")
	stale, _, _ := b.sink(t).Open(testCtx(t), "0")
	writeFlush(t, w, sinktest.Events("0", 50, 59))
	if err := stale.Write(testCtx(t), sinktest.Events("0", 50, 54)); err != nil {
		t.Fatal(err)
	}
	if _, err := stale.Flush(testCtx(t)); !errors.Is(err, sinks.ErrFenced) {
		t.Fatalf("stale owner on Blob: %v, want ErrFenced", err)
	}
	wantOnce(t, b.download(t), "0", 0, 59)
}
