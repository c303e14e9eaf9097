package parquet

import (
	"strings"
	"testing"

	pq "github.com/parquet-go/parquet-go"

	"github.com/ehsink/ehsink/internal/buildinfo"
	"github.com/ehsink/ehsink/internal/parquettest"
	"github.com/ehsink/ehsink/sinks/sinktest"
)

// TestEveryFileNamesItsColumns writes several files with one writer (and,
// with routes, several files per route), then checks the footer of every
// file: each column chunk's path_in_schema must be its schema leaf's path.
// A writer reused across files by GenericWriter.Reset writes empty paths
// from its second file on (parquet-go/parquet-go#602), which readers that
// resolve columns by path refuse. The footers are read by arrow-go and by
// parquet-go itself, so neither reader's tolerance hides the defect.
func TestEveryFileNamesItsColumns(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*sinkConfig)
	}{
		{"single", func(c *sinkConfig) { c.MaxRows = 10 }},
		{"routed", func(c *sinkConfig) { routed(t)(c); c.MaxRows = 10 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachDestination(t, func(t *testing.T, d destination) {
				s := newSink(t, d, tc.edit)
				w, _ := open(t, s, "0")
				events := sinktest.Events("0", 0, 59)
				for i := 0; i < len(events); i += 10 {
					writeAll(t, w, events[i:i+10])
					flush(t, w) // one commit per 10 events: 6 files per route
				}
				files := 0
				for name, data := range d.files(t) {
					if !strings.HasSuffix(name, ".parquet") {
						continue
					}
					files++
					if err := parquettest.CheckPaths(data); err != nil {
						t.Errorf("%s: %v", name, err)
					}
					f, err := pq.OpenFile(strings.NewReader(string(data)), int64(len(data)))
					if err != nil {
						t.Fatalf("%s: parquet-go cannot open it: %v", name, err)
					}
					leaves := f.Schema().Columns()
					for rg, g := range f.Metadata().RowGroups {
						for c, chunk := range g.Columns {
							if got, want := strings.Join(chunk.MetaData.PathInSchema, "."), strings.Join(leaves[c], "."); got != want {
								t.Errorf("%s row group %d column %d: path_in_schema %q, want %q", name, rg, c, got, want)
							}
						}
					}
				}
				switch {
				case tc.name == "single" && files != 6:
					t.Fatalf("%d data files, want 6 (one per commit)", files)
				case tc.name == "routed" && files < 12:
					t.Fatalf("%d data files, want at least 12 (several per route)", files)
				}
			})
		})
	}
}

// TestCreatedByNamesTheBuild checks that a file's created_by names the
// build that wrote it: the version and commit `make build` stamps into
// internal/buildinfo (run with -ldflags "-X
// github.com/ehsink/ehsink/internal/buildinfo.version=... -X ...commit=..."
// to see them), or what Go recorded, never empty ones.
func TestCreatedByNamesTheBuild(t *testing.T) {
	d := localDestination(t)
	s := newSink(t, d, nil)
	w, _ := open(t, s, "0")
	writeAll(t, w, sinktest.Events("0", 0, 2))
	flush(t, w)
	b := buildinfo.Get()
	want := "ehsink version " + b.Version + " (build " + b.Commit + ")"
	files := parquetFiles(t, d)
	if len(files) != 1 {
		t.Fatalf("%d files, want 1", len(files))
	}
	for name, data := range files {
		rdr, err := parquetReader(data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := rdr.MetaData().GetCreatedBy()
		rdr.Close()
		if got != want {
			t.Fatalf("%s: created_by %q, want %q", name, got, want)
		}
		t.Logf("created_by %q", got)
	}
}
