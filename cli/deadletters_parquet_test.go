package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/ehsink/ehsink/internal/parquettest"
	"github.com/ehsink/ehsink/internal/testenv"
)

// TestDeadLettersReplayParquet: `deadletters replay` for the Parquet sink,
// on a local folder and on Blob Storage (Azurite). A real run whose
// mapping refuses some events (amounts beyond decimal(4,2), an event
// without its id) commits data files and _dead_letters files; the config
// is then corrected (the amount widened, test events filtered out). A
// replay cancelled after its first letter, then a replay of all, leave
// exactly the rows a correct first run makes, each once (read back with
// arrow-go, which checks each column chunk's path), partition 0's files
// as the run left them; a second replay writes nothing.
func TestDeadLettersReplayParquet(t *testing.T) {
	for _, dest := range []string{"local", "blob"} {
		t.Run(dest, func(t *testing.T) {
			dir := t.TempDir()
			sink := "dir: " + filepath.Join(dir, "out")
			files := func() map[string][]byte { return localFiles(t, filepath.Join(dir, "out")) }
			if dest == "blob" {
				az := testenv.Azurite(t)
				name := az.ContainerName(t)
				sink = fmt.Sprintf("blob: {connection: %q, container: %s, spool_dir: %s}", az.ConnectionString(), name, filepath.Join(dir, "spool"))
				client, err := container.NewClientFromConnectionString(az.ConnectionString(), name, nil)
				if err != nil {
					t.Fatal(err)
				}
				files = func() map[string][]byte { return blobFiles(t, client) }
			}
			replayParquet(t, dir, sink, files)
		})
	}
}

func replayParquet(t *testing.T, dir, dest string, files func() map[string][]byte) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := l.Addr().String()
	l.Close()
	config := func(amount, extra string) string {
		return `
drain_timeout: 5s
emulator: {listen: ` + listen + `, hubs: {orders: 1}}
connectors:
  - name: orders
    source: {connection: emulator, eventhub: orders, batch: {max_events: 10, max_wait: 100ms}}
    checkpoint: {file: {dir: ` + filepath.Join(dir, "checkpoints") + `}}` + extra + `
    sink:
      type: parquet
      ` + dest + `
      max_age: 200ms
      columns:
        id: {from: $.id, nullable: false}
        amount: {from: $.amount, type: "` + amount + `"}
        seq: {from: "@sequence_number", type: int64}
`
	}
	first := writeIn(t, dir, "first.yaml", config("decimal(4,2)", ""))
	fixed := writeIn(t, dir, "fixed.yaml", config("decimal(7,2)", `
    filter: {drop: "$.test == true"}`))
	events := amountEvents(t, dir)

	// rows reads every data file: "id|amount|seq" by seq; partition 0's
	// data file names, apart.
	rows := func() (rows, partition0 []string) {
		t.Helper()
		for name, data := range files() {
			if !strings.HasSuffix(name, ".parquet") {
				continue
			}
			if strings.Contains(name, "/partition=0/") {
				partition0 = append(partition0, name)
			}
			tb, err := parquettest.Read(data)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			for _, r := range tb.Rows {
				rows = append(rows, fmt.Sprintf("%v|%v|%v", r["id"], r["amount"], r["seq"]))
			}
		}
		bySeq := func(a, b string) int {
			return strings.Compare(a[strings.LastIndexByte(a, '|'):], b[strings.LastIndexByte(b, '|'):])
		}
		slices.SortFunc(rows, bySeq)
		slices.Sort(partition0)
		return rows, partition0
	}
	letters := func() int {
		n := 0
		for name, data := range files() {
			if strings.Contains(name, "/_dead_letters/") {
				n += bytes.Count(data, []byte("\n"))
			}
		}
		return n
	}

	runCtx, stopRun := context.WithCancel(ctx)
	var logs bytes.Buffer
	done := make(chan int, 1)
	go func() { done <- dispatch(runCtx, []string{"run", "-c", first}, io.Discard, &logs) }()
	waitFor(t, ctx, done, "the emulator listening", func() bool {
		c, err := net.Dial("tcp", listen)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	if code, _, stderr := cli(t, "send", "-c", first, "--file", events); code != exitOK {
		t.Fatalf("send: exit %d: %s", code, stderr)
	}
	waitFor(t, ctx, done, "3 rows and 4 dead letters", func() bool {
		got, _ := rows()
		return len(got) == 3 && letters() == 4
	})
	stopRun()
	if code := <-done; code != exitOK {
		t.Fatalf("run: exit %d:\n%s", code, logs.String())
	}
	_, runFiles := rows()

	code, out, stderr := cli(t, "deadletters", "list", "-c", fixed)
	t.Logf("list:\n%s", out)
	if code != exitOK || !strings.Contains(out, "4 letter(s)") || strings.Count(out, "does not fit") != 3 {
		t.Fatalf("list: exit %d\n%s%s\nwant 4 letters, 3 amounts that do not fit", code, out, stderr)
	}
	code, out, stderr = cli(t, "deadletters", "show", "-c", fixed, "1")
	if code != exitOK || !strings.Contains(out, `"id": "o-2"`) || !strings.Contains(out, "_dead_letters/") {
		t.Fatalf("show 1: exit %d\n%s%s\nwant the letter of o-2 and its file", code, out, stderr)
	}
	code, out, _ = cli(t, "deadletters", "replay", "-c", fixed, "--dry-run")
	t.Logf("replay --dry-run:\n%s", out)
	if code != exitFailure || !strings.Contains(out, "4 letter(s): 2 would be replayed (dry run: nothing written), 1 dropped by the filter, 1 failed again") {
		t.Fatalf("dry run: exit %d\n%s", code, out)
	}
	if got, _ := rows(); len(got) != 3 {
		t.Fatalf("the dry run wrote: %q", got)
	}

	cctx, cancelReplay := context.WithCancel(ctx)
	var errOut bytes.Buffer
	stopped := &cancelOnWrite{w: &bytes.Buffer{}, cancel: cancelReplay}
	if code := dispatch(cctx, []string{"deadletters", "replay", "-c", fixed}, stopped, &errOut); code != exitFailure || !strings.Contains(errOut.String(), "context canceled") {
		t.Fatalf("cancelled replay: exit %d, stderr %s; want 1 and the cancellation", code, errOut.String())
	}
	cancelReplay()
	if got, _ := rows(); len(got) != 4 {
		t.Fatalf("the cancelled replay left %q, want the first letter's row written", got)
	}
	code, out, _ = cli(t, "deadletters", "replay", "-c", fixed)
	t.Logf("replay:\n%s", out)
	if code != exitFailure || !strings.Contains(out, "3 letter(s): 1 replayed, 1 dropped by the filter, 1 failed again") {
		t.Fatalf("replay: exit %d\n%s", code, out)
	}
	want := []string{"o-1|1250e-2|0", "o-2|123450e-2|1", "o-3|300e-2|2", "o-4|9999999e-2|3", "o-7|700e-2|6"}
	if got, p0 := rows(); !slices.Equal(got, want) || !slices.Equal(p0, runFiles) {
		t.Fatalf("after the replay the files hold %q, partition 0's %q;\nwant what a correct first run writes %q, partition 0's as the run left them %q", got, p0, want, runFiles)
	}
	// The dropped letter's mark (a dead letter of its replay partition)
	// is no letter of its own.
	code, out, _ = cli(t, "deadletters", "list", "-c", fixed, "--replayed")
	t.Logf("list --replayed:\n%s", out)
	if code != exitOK || !strings.Contains(out, "\n4 letter(s)") || len(regexp.MustCompile(`(?m)^orders\s+0\s+1\s+1\s`).FindAllString(out, -1)) != 3 {
		t.Fatalf("list --replayed: exit %d\n%s\nwant the 4 letters, 3 of them replayed", code, out)
	}
	code, out, _ = cli(t, "deadletters", "replay", "-c", fixed)
	if code != exitFailure || !strings.Contains(out, "1 letter(s): 0 replayed, 0 dropped by the filter, 1 failed again") {
		t.Fatalf("second replay: exit %d\n%s\nwant only the letter without an id, the dropped one marked", code, out)
	}
	if got, _ := rows(); !slices.Equal(got, want) {
		t.Fatalf("the second replay wrote: %q", got)
	}
}

// localFiles reads every file under root, by slash-separated name.
func localFiles(t *testing.T, root string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if os.IsNotExist(err) {
			return filepath.SkipAll
		}
		if err != nil || d.IsDir() || strings.HasPrefix(d.Name(), ".") {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(root, p)
		out[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// blobFiles reads every blob of a container.
func blobFiles(t *testing.T, client *container.Client) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	pager := client.NewListBlobsFlatPager(nil)
	for pager.More() {
		page, err := pager.NextPage(t.Context())
		if err != nil {
			t.Fatalf("list blobs: %v", err)
		}
		for _, b := range page.Segment.BlobItems {
			resp, err := client.NewBlobClient(*b.Name).DownloadStream(t.Context(), nil)
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
