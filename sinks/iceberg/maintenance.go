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
func (s *sink) maybeMaintain(ctx context.Context) {
	m := &s.cfg.Maintenance
	if m.Disabled {
		return
	}
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	now := s.now()
	if now.Sub(s.lastMaintenance) < m.Every {
		return
	}
	s.lastMaintenance = now
	if err := s.maintain(ctx); err != nil {
		s.log.Warn("table maintenance", "err", err)
	}
}

// maintain expires snapshots and removes orphan files. The caller holds
// commitMu.
func (s *sink) maintain(ctx context.Context) error {
	m := &s.cfg.Maintenance
	before := len(s.tbl.Metadata().Snapshots())
	for attempt := 1; ; attempt++ {
		tx := s.tbl.NewTransaction()
		err := tx.ExpireSnapshots(table.WithRetainLast(m.KeepSnapshots), table.WithOlderThan(m.MaxSnapshotAge), table.WithPostCommit(true))
		if err != nil {
			return fmt.Errorf("expire snapshots: %w", err)
		}
		tbl, err := tx.Commit(ctx)
		if err == nil {
			s.tbl = tbl
			break
		}
		if !errors.Is(err, table.ErrCommitFailed) || attempt >= maxCommitAttempts {
			return fmt.Errorf("expire snapshots: %w", err)
		}
		fresh, lerr := s.cat.LoadTable(ctx, s.ident)
		if lerr != nil {
			return fmt.Errorf("expire snapshots: reload: %w", lerr)
		}
		s.tbl = fresh
	}
	res, err := s.tbl.DeleteOrphanFiles(ctx, table.WithFilesOlderThan(m.OrphanAge))
	if err != nil {
		return fmt.Errorf("remove orphan files: %w", err)
	}
	s.log.Info("table maintenance", "snapshots_expired", before-len(s.tbl.Metadata().Snapshots()),
		"snapshots", len(s.tbl.Metadata().Snapshots()), "orphans_removed", len(res.DeletedFiles))
	return nil
}
