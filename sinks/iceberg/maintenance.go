package iceberg

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/apache/iceberg-go/table"
	"github.com/apache/iceberg-go/table/compaction"
)

// maybeMaintain runs maintenance after a commit once maintenance.every has
// passed since the last run: it expires the snapshots beyond
// keep_snapshots that are older than max_snapshot_age (removing the files
// only they referenced), then removes the table's orphan files older than
// orphan_age. Both are iceberg-go's own operations. A failure is logged
// and retried at the next run; it never fails the commit that triggered
// it, which is already made.
func (s *sink) maybeMaintain(ctx context.Context, d *dest) {
	m := &s.cfg.Maintenance
	if m.Disabled {
		return
	}
	if err := d.lock(ctx); err != nil {
		return // at a later commit
	}
	defer d.mu.Unlock()
	now := s.now()
	if now.Sub(d.lastMaintenance) < m.Every {
		return
	}
	d.lastMaintenance = now
	if err := s.maintain(ctx, d); err != nil {
		s.log.Warn("table maintenance", "table", d.name(), "err", err)
	}
}

// maintain expires snapshots and removes orphan files of d's table. The
// caller holds d.mu.
func (s *sink) maintain(ctx context.Context, d *dest) error {
	m := &s.cfg.Maintenance
	if m.Compact {
		if err := s.compact(ctx, d); err != nil {
			// Tried again at the next maintenance; expiry still runs.
			s.log.Warn("table compaction", "table", d.name(), "err", err)
		}
	}
	before := len(d.tbl.Load().Metadata().Snapshots())
	for attempt := 1; ; attempt++ {
		tx := d.tbl.Load().NewTransaction()
		err := tx.ExpireSnapshots(table.WithRetainLast(m.KeepSnapshots), table.WithOlderThan(m.MaxSnapshotAge), table.WithPostCommit(true))
		if err != nil {
			return fmt.Errorf("expire snapshots: %w", err)
		}
		if err := s.step(stepExpiryPlanned); err != nil {
			return err
		}
		tbl, err := tx.Commit(ctx)
		if err == nil || removedBefore(tbl, err) {
			d.tbl.Store(tbl)
			break
		}
		// Another replica's commit came first: expire again on the
		// table as it is now, as the writer commits again after a lost
		// race (other failures wait for the next maintenance).
		if !lostRace(err) || attempt >= maxCommitAttempts {
			return fmt.Errorf("expire snapshots: %w", err)
		}
		if err := backoff(ctx, attempt); err != nil {
			return fmt.Errorf("expire snapshots: %w", err)
		}
		if _, err := s.reload(ctx, d); err != nil {
			return fmt.Errorf("expire snapshots: %w", err)
		}
	}
	res, err := d.tbl.Load().DeleteOrphanFiles(ctx, table.WithFilesOlderThan(m.OrphanAge))
	if err != nil {
		return fmt.Errorf("remove orphan files: %w", err)
	}
	s.log.Info("table maintenance", "table", d.name(), "snapshots_expired", before-len(d.tbl.Load().Metadata().Snapshots()),
		"snapshots", len(d.tbl.Load().Metadata().Snapshots()), "orphans_removed", len(res.DeletedFiles))
	return nil
}

// removedBefore reports whether an expiry's commit landed (iceberg-go
// returns the new table) and failed only to remove files that were gone
// already: another replica's expiry of the same snapshots, or its orphan
// removal, deleted them first. Nothing is left to do then, and the table
// is the committed one.
func removedBefore(tbl *table.Table, err error) bool {
	if tbl == nil || lostRace(err) {
		return false
	}
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	for _, e := range errs {
		if e != nil && !errors.Is(e, fs.ErrNotExist) {
			return false
		}
	}
	return true
}

// stepExpiryPlanned is the test hook's step between an expiry's plan
// and its commit.
const stepExpiryPlanned = "expiry planned"

// stepCompactionPlanned is the test hook's step between a compaction's
// plan and its commit.
const stepCompactionPlanned = "compaction planned"

// compact rewrites d's small data files with iceberg-go's planner and
// rewrite (files under three quarters of the target, at least five per
// partition). Its snapshot carries the ehsink keys of the snapshot it
// rewrites, unchanged, and asserts that snapshot: a commit of any writer
// in between fails the compaction (tried again at the next maintenance)
// rather than let it carry watermarks older than that commit's. The
// caller holds d.mu.
func (s *sink) compact(ctx context.Context, d *dest) error {
	tbl := d.tbl.Load()
	if tbl.CurrentSnapshot() == nil {
		return nil
	}
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		return fmt.Errorf("plan the scan: %w", err)
	}
	cfg := compaction.DefaultConfig()
	target := int64(s.cfg.Maintenance.CompactTargetSize)
	cfg.TargetFileSizeBytes, cfg.MinFileSizeBytes, cfg.MaxFileSizeBytes = target, target*3/4, target*9/5
	plan, err := cfg.PlanCompaction(tasks)
	if err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	if len(plan.Groups) == 0 {
		return nil
	}
	groups := make([]table.CompactionTaskGroup, len(plan.Groups))
	for i, g := range plan.Groups {
		groups[i] = table.CompactionTaskGroup{PartitionKey: g.PartitionKey, Tasks: g.Tasks, TotalSizeBytes: g.TotalSizeBytes}
	}
	tx := tbl.NewTransaction()
	if err := tx.AssertRefSnapshotID(table.MainBranch); err != nil {
		return err
	}
	res, err := tx.RewriteDataFiles(ctx, groups, table.RewriteDataFilesOptions{SnapshotProps: carriedProps(tbl.Metadata())})
	if err != nil {
		return fmt.Errorf("rewrite: %w", err)
	}
	if err := s.step(stepCompactionPlanned); err != nil {
		return err
	}
	newTbl, err := tx.Commit(ctx)
	if err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	d.tbl.Store(newTbl)
	s.log.Info("table compacted", "table", d.name(), "files_removed", res.RemovedDataFiles, "files_added", res.AddedDataFiles,
		"bytes_before", res.BytesBefore, "bytes_after", res.BytesAfter)
	return nil
}
