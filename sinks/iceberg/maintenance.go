package iceberg

import (
	"context"
	"errors"
	"fmt"

	"github.com/apache/iceberg-go/table"
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
	d.mu.Lock()
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
	before := len(d.tbl.Metadata().Snapshots())
	for attempt := 1; ; attempt++ {
		tx := d.tbl.NewTransaction()
		err := tx.ExpireSnapshots(table.WithRetainLast(m.KeepSnapshots), table.WithOlderThan(m.MaxSnapshotAge), table.WithPostCommit(true))
		if err != nil {
			return fmt.Errorf("expire snapshots: %w", err)
		}
		tbl, err := tx.Commit(ctx)
		if err == nil {
			d.tbl = tbl
			break
		}
		if !errors.Is(err, table.ErrCommitFailed) || attempt >= maxCommitAttempts {
			return fmt.Errorf("expire snapshots: %w", err)
		}
		fresh, lerr := s.cat.LoadTable(ctx, d.ident)
		if lerr != nil {
			return fmt.Errorf("expire snapshots: reload: %w", lerr)
		}
		d.tbl = fresh
	}
	res, err := d.tbl.DeleteOrphanFiles(ctx, table.WithFilesOlderThan(m.OrphanAge))
	if err != nil {
		return fmt.Errorf("remove orphan files: %w", err)
	}
	s.log.Info("table maintenance", "table", d.name(), "snapshots_expired", before-len(d.tbl.Metadata().Snapshots()),
		"snapshots", len(d.tbl.Metadata().Snapshots()), "orphans_removed", len(res.DeletedFiles))
	return nil
}
