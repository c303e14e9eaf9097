package parquet

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/ehsink/ehsink/internal/parquettest"
	"github.com/ehsink/ehsink/internal/secret"
	"github.com/ehsink/ehsink/internal/table/mapping"
	"github.com/ehsink/ehsink/internal/testenv"
	"github.com/ehsink/ehsink/sinks"
)

// destination is where a test's sink writes, and a view of it that reads
// every visible file back without going through the sink.
type destination struct {
	name string
	// config returns a sink config writing to this destination.
	config func() *sinkConfig
	// files returns every visible file: name -> contents.
	files func(t *testing.T) map[string][]byte
	// temps returns leftover temporary objects a crash may leave (local:
	// hidden .ehsink-* files; Blob: spool files, never visible in the container).
	temps func(t *testing.T) []string
}

// localDestination is a fresh temporary directory.
func localDestination(t *testing.T) destination {
	t.Helper()
	return localDestinationAt(t.TempDir())
}

// localDestinationAt is the directory dir.
func localDestinationAt(dir string) destination {
	return destination{
		name:   "local",
		config: func() *sinkConfig { c := newConfig(); c.Dir = dir; return c },
		files: func(t *testing.T) map[string][]byte {
			t.Helper()
			out := map[string][]byte{}
			err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() || strings.HasPrefix(d.Name(), ".") {
					return err // readers skip hidden files, as Hive and Spark do
				}
				rel, _ := filepath.Rel(dir, p)
				if strings.HasPrefix(filepath.ToSlash(rel), claimsRoot+"/") {
					return nil // the sink's own bookkeeping, hidden from readers
				}
				b, err := os.ReadFile(p)
				out[filepath.ToSlash(rel)] = b
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			return out
		},
		temps: func(t *testing.T) []string {
			t.Helper()
			var out []string
			_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() && strings.HasPrefix(d.Name(), tempPrefix) {
					out = append(out, p)
				}
				return nil
			})
			return out
		},
	}
}

// blobDestination is a fresh container in the shared Azurite.
func blobDestination(t *testing.T) destination {
	t.Helper()
	az := testenv.Azurite(t)
	name := az.ContainerName(t)
	spool := t.TempDir()
	conn := az.ConnectionString()
	client, err := newBlobClient(&blobConfig{Connection: secret.String(conn), Container: name})
	if err != nil {
		t.Fatal(err)
	}
	return destination{
		name: "blob",
		config: func() *sinkConfig {
			c := newConfig()
			c.Blob = &blobConfig{Connection: secret.String(conn), Container: name, SpoolDir: spool}
			return c
		},
		files: func(t *testing.T) map[string][]byte { t.Helper(); return blobFiles(t, client) },
		temps: func(t *testing.T) []string {
			t.Helper()
			entries, _ := os.ReadDir(spool)
			var out []string
			for _, e := range entries {
				out = append(out, e.Name())
			}
			return out
		},
	}
}

func blobFiles(t *testing.T, client *container.Client) map[string][]byte {
	t.Helper()
	ctx := context.Background()
	out := map[string][]byte{}
	pager := client.NewListBlobsFlatPager(nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatalf("list blobs: %v", err)
		}
		for _, b := range page.Segment.BlobItems {
			if strings.HasPrefix(*b.Name, claimsRoot+"/") {
				continue // the sink's own bookkeeping, hidden from readers
			}
			resp, err := client.NewBlobClient(*b.Name).DownloadStream(ctx, nil)
			if err != nil {
				t.Fatalf("download %s: %v", *b.Name, err)
			}
			data, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatalf("download %s: %v", *b.Name, err)
			}
			out[*b.Name] = data
		}
	}
	return out
}

// table is a Parquet file as arrow-go reads it.
// table is a file read back with arrow-go (parquettest), not with the
// writer's library.
type table = parquettest.Table

func readParquet(t *testing.T, name string, data []byte) table {
	t.Helper()
	tb, err := parquettest.Read(data)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return tb
}

// committedSeqs reads every visible data file of a partition and returns
// the seq column, files in name order (which is sequence order), rows in
// file order. It also checks each file's name against its metadata.
func committedSeqs(t *testing.T, d destination, partition string) []int64 {
	t.Helper()
	return committedSeqsUnder(t, d, partition, "", nil)
}

// committedSeqsUnder is committedSeqs for the files whose names start with
// prefix; each row is also passed to check, when set.
func committedSeqsUnder(t *testing.T, d destination, partition, prefix string, check func(name string, row map[string]any)) []int64 {
	t.Helper()
	files := d.files(t)
	names := make([]string, 0, len(files))
	for n := range files {
		if strings.HasSuffix(n, ".parquet") && strings.Contains(n, "/partition="+partition+"/") && strings.HasPrefix(n, prefix) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	var out []int64
	for _, n := range names {
		tb := readParquet(t, n, files[n])
		if tb.Meta[metaPartition] != partition {
			t.Fatalf("%s: metadata partition %q, want %q", n, tb.Meta[metaPartition], partition)
		}
		base := strings.TrimSuffix(n[strings.LastIndexByte(n, '/')+1:], ".parquet")
		parts := strings.Split(base, "-")
		first, _ := strconv.ParseInt(parts[1], 10, 64)
		last, _ := strconv.ParseInt(parts[2], 10, 64)
		if tb.Meta[metaFirstSeq] != strconv.FormatInt(first, 10) || tb.Meta[metaLastSeq] != strconv.FormatInt(last, 10) {
			t.Fatalf("%s: metadata range %s..%s does not match the name", n, tb.Meta[metaFirstSeq], tb.Meta[metaLastSeq])
		}
		for _, r := range tb.Rows {
			if check != nil {
				check(n, r)
			}
			seq := r["seq"].(int64)
			if seq < first || seq > last {
				t.Fatalf("%s holds seq %d outside its range", n, seq)
			}
			out = append(out, seq)
		}
	}
	return out
}

// kitColumns maps the sinktest kit's event body, plus metadata, to 8 columns.
func kitColumns(t testing.TB) mapping.Columns {
	t.Helper()
	var cols mapping.Columns
	for _, c := range [][3]string{
		{"id", "$.id", "string"},
		{"seq", "@sequence_number", "int64"},
		{"customer", "$.customer", "string"},
		{"amount", "$.amount", "decimal(12,2)"},
		{"ts", "$.ts", "timestamp(ms)"},
		{"enqueued", "@enqueued_time", "timestamp"},
		{"key", "@partition_key", "string"},
		{"source", "@properties.source", "string"},
	} {
		col, err := mapping.NewColumn(c[0], c[1], c[2])
		if err != nil {
			t.Fatal(err)
		}
		cols = append(cols, col)
	}
	return cols
}

// newSink builds a sink on d with the kit's columns; edit adjusts the config.
func newSink(t *testing.T, d destination, edit func(*sinkConfig)) *sink {
	t.Helper()
	c := d.config()
	c.Columns = kitColumns(t)
	if edit != nil {
		edit(c)
	}
	s, err := newParquetSink(context.Background(), c, sinks.Info{Connector: "orders-pq", EventHub: "orders", ConsumerGroup: "$Default"})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// withSnappy returns edit with the files compressed by snappy: the tests
// that crash at every commit step make a sink per step, and each new sink's
// first zstd encoder allocates its tables (megabytes the race detector
// walks), which made those tests several times slower. Compression is not
// what they test; the conformance and reader tests keep zstd.
func withSnappy(edit func(*sinkConfig)) func(*sinkConfig) {
	return func(c *sinkConfig) {
		c.Compression = "snappy"
		if edit != nil {
			edit(c)
		}
	}
}

// clock is a settable test clock.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func parquetReader(data []byte) (*file.Reader, error) {
	return file.NewParquetReader(bytes.NewReader(data))
}
