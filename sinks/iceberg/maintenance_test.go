package iceberg

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/sinks/sinktest"
)

// TestMaintenanceBoundsMetadata commits 60 times, with maintenance after
// every commit (and manifests merged from 10 on, where iceberg's default
// waits for 100) and without it, and counts snapshots, metadata files and
// the table's other files (manifests, manifest lists): with maintenance
// they stay bounded by the config, without it they grow with the commits.
// The rows stay whole.
func TestMaintenanceBoundsMetadata(t *testing.T) {
	run := func(t *testing.T, commits int64, edit func(*sinkConfig)) (snapshots, metadataFiles, files int) {
		l := newLake(t)
		s := l.newSink(t, edit)
		clock := time.Now()
		s.setClock(func() time.Time { return clock })
		ctx := context.Background()
		w, _, err := s.Open(ctx, "0")
		if err != nil {
			t.Fatal(err)
		}
		for i := range commits {
			if err := w.Write(ctx, sinktest.Events("0", i*5, i*5+4)); err != nil {
				t.Fatal(err)
			}
			if _, err := w.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			clock = clock.Add(time.Minute)
		}
		w.Close(ctx)
		if got := l.scanSeqs(t)["0"]; int64(len(got)) != commits*5 {
			t.Fatalf("partition 0 holds %d rows, want %d", len(got), commits*5)
		}
		tbl := l.loadTable(t)
		_ = filepath.WalkDir(strings.TrimPrefix(tbl.Location(), "file://"), func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && !strings.HasSuffix(p, ".parquet") {
				files++
				if strings.HasSuffix(p, ".metadata.json") {
					metadataFiles++
				}
			}
			return err
		})
		return len(tbl.Metadata().Snapshots()), metadataFiles, files
	}
	const commits = 60
	snapsOff, metaOff, filesOff := run(t, commits, func(c *sinkConfig) { c.Maintenance.Disabled = true; c.Maintenance.KeepMetadataFiles = 1000 })
	snaps, meta, files := run(t, commits, func(c *sinkConfig) {
		c.Maintenance = maintenanceConfig{Every: time.Minute, KeepSnapshots: 5, MaxSnapshotAge: time.Nanosecond, KeepMetadataFiles: 10, OrphanAge: time.Nanosecond}
		c.Properties = map[string]string{table.ManifestMinMergeCountKey: "10"}
	})
	t.Logf("after %d commits: without maintenance %d snapshots, %d metadata files, %d metadata-side files; with it %d, %d, %d",
		commits, snapsOff, metaOff, filesOff, snaps, meta, files)
	if snapsOff != commits || snaps > 5 {
		t.Errorf("snapshots: %d without maintenance (want %d), %d with (want at most keep_snapshots 5)", snapsOff, commits, snaps)
	}
	if metaOff <= commits || meta > 11 {
		t.Errorf("metadata files: %d without maintenance (want over %d), %d with (want at most keep_metadata_files 10 + 1)", metaOff, commits, meta)
	}
	// A data file per commit stays (compaction is another job's); the
	// manifests are merged (at most 10 before a merge) and the expired
	// snapshots' manifest lists go: 11 metadata files, 5 manifest lists
	// and at most 10 manifests of each of the 5 kept snapshots.
	if files > 11+5+5*10 || filesOff < 3*commits {
		t.Errorf("metadata-side files: %d with maintenance (want at most %d), %d without (want at least %d)", files, 11+5+5*10, filesOff, 3*commits)
	}
}

// TestExpiryAfterAnotherReplicasExpiry: the files an expiry would remove
// are gone already (another replica's expiry or orphan removal deleted
// them first). The expiry commits all the same and is not a failure: the
// sink keeps the committed table (a stale one loses its next commit's
// race), and no warning is logged at every maintenance of every replica.
func TestExpiryAfterAnotherReplicasExpiry(t *testing.T) {
	l := newLake(t)
	s := l.newSink(t, func(c *sinkConfig) {
		c.Maintenance = maintenanceConfig{Every: time.Hour, KeepSnapshots: 2, MaxSnapshotAge: time.Nanosecond, KeepMetadataFiles: 10, OrphanAge: time.Hour}
	})
	ctx := context.Background()
	w, _, err := s.Open(ctx, "0")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	for i := range int64(6) {
		if err := w.Write(ctx, sinktest.Events("0", i*5, i*5+4)); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	d := s.dests[0]
	d.mu.Lock()
	defer d.mu.Unlock()
	snaps := d.tbl.Load().Metadata().Snapshots()
	if len(snaps) != 6 {
		t.Fatalf("%d snapshots before the expiry, want 6", len(snaps))
	}
	for _, sn := range snaps[:4] { // what keep_snapshots 2 expires
		if err := os.Remove(strings.TrimPrefix(sn.ManifestList, "file://")); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.maintain(ctx, d); err != nil {
		t.Fatalf("maintenance after another replica's: %v", err)
	}
	if n := len(d.tbl.Load().Metadata().Snapshots()); n != 2 {
		t.Errorf("the sink's table has %d snapshots after the expiry, want keep_snapshots 2", n)
	}
	if n := len(l.loadTable(t).Metadata().Snapshots()); n != 2 {
		t.Errorf("the catalog's table has %d snapshots after the expiry, want 2", n)
	}
}

// TestExpiryRetriesALostRace: two replicas commit to one table, and the
// second commits while the first's expiry is planned on the table as it
// was. iceberg-go's SQL catalog refuses the expiry with a plain error
// ("requirement failed: branch main has changed"); the expiry must be made
// again on the table's fresh metadata, as a writer's commit is, rather
// than skipped until the next maintenance.
func TestExpiryRetriesALostRace(t *testing.T) {
	l := newLake(t)
	const keep = 2
	a := l.newSink(t, func(c *sinkConfig) {
		c.Maintenance = maintenanceConfig{Every: time.Hour, KeepSnapshots: keep, MaxSnapshotAge: time.Nanosecond, KeepMetadataFiles: 100, OrphanAge: time.Hour}
	})
	b := l.newSink(t, func(c *sinkConfig) { c.Maintenance.Disabled = true })
	clock := time.Now()
	a.setClock(func() time.Time { return clock })
	ctx := context.Background()
	wa, _, err := a.Open(ctx, "0")
	if err != nil {
		t.Fatal(err)
	}
	defer wa.Close(ctx)
	wb, _, err := b.Open(ctx, "1")
	if err != nil {
		t.Fatal(err)
	}
	defer wb.Close(ctx)
	commit := func(w sinks.Writer, partition string, first int64) {
		t.Helper()
		if err := w.Write(ctx, sinktest.Events(partition, first, first+4)); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for i := range int64(5) { // the first flush's maintenance finds little to expire
		commit(wa, "0", i*5)
	}
	commit(wb, "1", 0)

	// B commits between the planning of A's next expiry and its commit.
	raced := 0
	a.setHook(func(step string) error {
		if step == stepExpiryPlanned && raced == 0 {
			raced++
			commit(wb, "1", 5)
		}
		return nil
	})
	clock = clock.Add(2 * time.Hour)
	commit(wa, "0", 25) // commits, then maintains: the race
	if raced != 1 {
		t.Fatalf("the expiry ran %d times into B's commit, want 1: the race was not staged", raced)
	}
	if n := len(l.loadTable(t).Metadata().Snapshots()); n != keep {
		t.Errorf("the catalog's table has %d snapshots after A's maintenance, want keep_snapshots %d: the expiry that lost the race was not made again", n, keep)
	}
	if got := l.scanSeqs(t); len(got["0"]) != 30 || len(got["1"]) != 10 {
		t.Errorf("rows: partition 0 holds %d (want 30), partition 1 %d (want 10)", len(got["0"]), len(got["1"]))
	}
}
