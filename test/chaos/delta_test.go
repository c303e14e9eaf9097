package chaos_test

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/ehsink/ehsink/internal/deltalog"
	"github.com/ehsink/ehsink/internal/parquettest"
)

// The Delta connector's table: a local folder shared by the replicas, its
// dead letters in the folder beside it.
func (h *harness) deltaDir() string { return filepath.Join(h.runDir, "delta", "orders") }

// deltaSink is the Delta connector's sink block: a checkpoint every 5
// versions, so that checkpoints are written (and read by restarts) under
// the faults too.
func (h *harness) deltaSink(cols string) string {
	return fmt.Sprintf(`    sink:
      type: delta
      table: %s
      max_age: 2s
      max_rows: 5000
      checkpoint_interval: 5
      orphan_age: 1m
      columns:
%s`, h.deltaDir(), cols)
}

// deltaSnapshot replays the log of the table in dir; nil when no replica
// has created it yet.
func deltaSnapshot(ctx context.Context, dir string) (*deltalog.Snapshot, error) {
	st, err := deltalog.NewLocalStore(dir)
	if err != nil {
		return nil, err
	}
	snap, err := deltalog.New(st).Load(ctx)
	if err != nil || snap.Version < 0 {
		return nil, err
	}
	return snap, nil
}

// deltaRows reads, with arrow-go, the live files of the table in dir.
func deltaRows(ctx context.Context, dir string) ([]map[string]any, error) {
	snap, err := deltaSnapshot(ctx, dir)
	if err != nil || snap == nil {
		return nil, err
	}
	var out []map[string]any
	for _, a := range snap.SortedFiles() {
		name, err := url.PathUnescape(a.Path)
		if err != nil {
			return nil, err
		}
		tb, err := parquettest.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
		if err != nil {
			return nil, fmt.Errorf("live file %s: %w", name, err)
		}
		out = append(out, tb.Rows...)
	}
	return out, nil
}

// readDelta returns the table's rows.
func (h *harness) readDelta(ctx context.Context) ([]row, error) {
	rows, err := deltaRows(ctx, h.deltaDir())
	if err != nil {
		return nil, err
	}
	out := make([]row, 0, len(rows))
	for _, r := range rows {
		part, ok1 := r["part"].(string)
		seq, ok2 := r["seq"].(int64)
		id, ok3 := r["id"].(string)
		if !ok1 || !ok2 || !ok3 {
			return nil, fmt.Errorf("row %v: part, seq, id are not string, int64, string", r)
		}
		out = append(out, row{pos: pos{part, seq}, id: id})
	}
	return out, nil
}

// deltaDeadLetters reads the connector's dead-letter table.
func (h *harness) deltaDeadLetters(ctx context.Context) ([]deadLetter, error) {
	rows, err := deltaRows(ctx, h.deltaDir()+"_dead_letters")
	if err != nil {
		return nil, err
	}
	var out []deadLetter
	for _, r := range rows {
		part, _ := r["partition"].(string)
		seq, _ := r["sequence_number"].(int64)
		reason, _ := r["reason"].(string)
		out = append(out, deadLetter{pos{part, seq}, reason})
	}
	return out, nil
}

// deltaWatermarks returns each partition's txn version in the table:
// what the sink resumes from.
func (h *harness) deltaWatermarks(ctx context.Context) (map[string]int64, error) {
	snap, err := deltaSnapshot(ctx, h.deltaDir())
	if err != nil || snap == nil {
		return nil, err
	}
	out := map[string]int64{}
	for app, t := range snap.Txns {
		if !strings.HasPrefix(app, "ehsink/"+connDelta+"/") {
			continue
		}
		out[app[strings.LastIndex(app, "/")+1:]] = t.Version
	}
	return out, nil
}
