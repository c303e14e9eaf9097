package delta

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ehsink/ehsink/internal/parquettest"
	"github.com/ehsink/ehsink/internal/table/mapping"
	"github.com/ehsink/ehsink/sinks"
)

func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// kitColumns maps the sinktest kit's event body, plus metadata.
func kitColumns(t testing.TB) mapping.Columns {
	t.Helper()
	var cols mapping.Columns
	for _, c := range [][3]string{
		{"id", "$.id", "string"},
		{"partition", "@partition", "string"},
		{"seq", "@sequence_number", "int64"},
		{"customer", "$.customer", "string"},
		{"amount", "$.amount", "decimal(12,2)"},
		{"ts", "$.ts", "timestamp"},
		{"key", "@partition_key", "string"},
	} {
		col, err := mapping.NewColumn(c[0], c[1], c[2])
		if err != nil {
			t.Fatal(err)
		}
		cols = append(cols, col)
	}
	return cols
}

var testInfo = sinks.Info{Connector: "c1", Namespace: "ns.servicebus.windows.net", EventHub: "hub", ConsumerGroup: "$Default"}

// newTestSink opens a sink of a local table in dir; edit changes the
// config first.
func newTestSink(t testing.TB, dir string, edit func(*sinkConfig)) *sink {
	t.Helper()
	c := newConfig()
	c.Table = dir
	c.Columns = kitColumns(t)
	if edit != nil {
		edit(c)
	}
	s, err := newDeltaSink(testCtx(t), c, testInfo)
	if err != nil {
		t.Fatalf("newDeltaSink: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// logAdds replays a local table's JSON commits on its own, apart from
// package deltalog: the paths of the live data files in the order they
// were added, and the latest txn version of each appId. A reader of the
// table has no other source of truth than these files.
func logAdds(t testing.TB, dir string) (files []string, txns map[string]int64) {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "_delta_log", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	txns = map[string]int64{}
	for i, n := range names {
		if want := fmt.Sprintf("%020d.json", i); filepath.Base(n) != want {
			t.Fatalf("log file %d is %s, want %s (versions are contiguous from 0)", i, filepath.Base(n), want)
		}
		data, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, 1<<24)
		for sc.Scan() {
			var a struct {
				Add    *struct{ Path string } `json:"add"`
				Remove *struct{ Path string } `json:"remove"`
				Txn    *struct {
					AppID   string `json:"appId"`
					Version int64  `json:"version"`
				} `json:"txn"`
			}
			if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
				t.Fatalf("%s: %v", n, err)
			}
			switch {
			case a.Add != nil:
				files = append(files, a.Add.Path)
			case a.Remove != nil:
				files = slices.DeleteFunc(files, func(p string) bool { return p == a.Remove.Path })
			case a.Txn != nil:
				txns[a.Txn.AppID] = a.Txn.Version
			}
		}
	}
	return files, txns
}

// readRows reads the rows of a local table's live files with arrow-go
// (internal/parquettest), in the order the log added them.
func readRows(t testing.TB, dir string) []map[string]any {
	t.Helper()
	files, _ := logAdds(t, dir)
	var rows []map[string]any
	for _, f := range files {
		p, err := url.PathUnescape(f)
		if err != nil {
			t.Fatal(err)
		}
		tb, err := parquettest.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
		if err != nil {
			t.Fatalf("data file %s: %v", f, err)
		}
		rows = append(rows, tb.Rows...)
	}
	return rows
}

// seqsOf returns each partition's seq column in row order.
func seqsOf(rows []map[string]any) map[string][]int64 {
	out := map[string][]int64{}
	for _, r := range rows {
		p, _ := r["partition"].(string)
		out[p] = append(out[p], r["seq"].(int64))
	}
	return out
}

// dataFiles lists the Parquet files under a local table (committed or
// not).
func dataFiles(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".parquet") && !strings.Contains(p, "_delta_log") {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
