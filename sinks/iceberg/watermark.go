package iceberg

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"strconv"
	"strings"

	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"

	"github.com/ehsink/ehsink/sinks"
)

// Snapshot summary keys. Each commit of the sink puts the watermark of the
// partition it commits under its key, and carries every other ehsink key
// of the parent snapshot forward, so that the current snapshot holds the
// watermark of every partition the sink ever committed. A snapshot made by
// another engine (a compaction) may not carry them; the watermark is then
// found in its ancestors.
const (
	keyPrefix = "ehsink."
	// carriedKey marks a snapshot whose summary carries the ehsink keys of
	// all its ancestors: a walk for them stops there.
	carriedKey = "ehsink-watermarks"
)

// watermarkKey is the summary key of a partition's watermark:
// ehsink.<connector>.<eventhub>.<consumergroup>.p<partition>. Its value is
// the sequence number, a comma, and the offset of the last event.
func watermarkKey(info sinks.Info, partition string) string {
	return keyPrefix + info.Connector + "." + info.EventHub + "." + info.ConsumerGroup + ".p" + partition
}

func formatPosition(p *sinks.Position) string {
	return strconv.FormatInt(p.SequenceNumber, 10) + "," + p.Offset
}

func parsePosition(key, v string) (*sinks.Position, error) {
	seq, off, _ := strings.Cut(v, ",")
	n, err := strconv.ParseInt(seq, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("snapshot summary %s=%q: not a sequence number: %w", key, v, err)
	}
	return &sinks.Position{SequenceNumber: n, Offset: off}, nil
}

// ancestry calls fn with the current snapshot and its ancestors, newest
// first, until fn returns false.
func ancestry(meta table.Metadata, fn func(*table.Snapshot) bool) {
	seen := map[int64]bool{}
	for snap := meta.CurrentSnapshot(); snap != nil && !seen[snap.SnapshotID]; {
		seen[snap.SnapshotID] = true
		if !fn(snap) || snap.ParentSnapshotID == nil {
			return
		}
		snap = meta.SnapshotByID(*snap.ParentSnapshotID)
	}
}

// watermarkOf returns the watermark stored under key in the newest
// snapshot that has it, or nil.
func watermarkOf(meta table.Metadata, key string) (*sinks.Position, error) {
	var found string
	ancestry(meta, func(snap *table.Snapshot) bool {
		if snap.Summary == nil {
			return true
		}
		if v, ok := snap.Summary.Properties[key]; ok {
			found = v
			return false
		}
		_, carried := snap.Summary.Properties[carriedKey]
		return !carried
	})
	if found == "" {
		return nil, nil
	}
	return parsePosition(key, found)
}

// carriedProps are the ehsink keys of the current snapshot and of its
// ancestors up to one that carries them all, marked as carrying them: the
// summary of a snapshot that moves no watermark (a compaction).
func carriedProps(meta table.Metadata) ice.Properties {
	props := ice.Properties{}
	ancestry(meta, func(snap *table.Snapshot) bool {
		if snap.Summary == nil {
			return true
		}
		for k, v := range snap.Summary.Properties {
			if _, seen := props[k]; !seen && strings.HasPrefix(k, keyPrefix) {
				props[k] = v
			}
		}
		_, carried := snap.Summary.Properties[carriedKey]
		return !carried
	})
	props[carriedKey] = "carried"
	return props
}

// fileTag is what names a partition's data files: the first six bytes of
// the write UUID in a data file's name (iceberg-go names files
// {partition}-{task}-{write uuid}-{count}.parquet) come from a hash of the
// partition's key, so Open can tell its own uncommitted files from other
// writers'.
func fileTag(key string) [6]byte {
	sum := sha256.Sum256([]byte(key))
	var tag [6]byte
	copy(tag[:], sum[:])
	return tag
}

// writeUUID is a fresh write UUID carrying tag (a version 8 UUID, whose
// bits are free).
func writeUUID(tag [6]byte) uuid.UUID {
	var u uuid.UUID
	_, _ = rand.Read(u[:])
	copy(u[:], tag[:])
	u[6] = u[6]&0x0f | 0x80
	u[8] = u[8]&0x3f | 0x80
	return u
}

// tagged reports whether a data file's name carries tag.
func tagged(name string, tag [6]byte) bool {
	want := hex.EncodeToString(tag[:4]) + "-" + hex.EncodeToString(tag[4:])
	return strings.Contains(path.Base(name), "-"+want)
}

// removeUncommitted removes the partition's data files that no snapshot
// references and that are older than maintenance.orphan_age: files of
// commits that failed or whose writer died before the catalog took them.
// The table's own orphan scan (iceberg-go's PlanOrphanFiles) decides what
// is unreferenced.
func (s *sink) removeUncommitted(ctx context.Context, tbl *table.Table, tag [6]byte) error {
	plan, err := tbl.PlanOrphanFiles(ctx, table.WithLocation(strings.TrimSuffix(tbl.Location(), "/")+"/data"),
		table.WithFilesOlderThan(s.cfg.Maintenance.OrphanAge))
	if err != nil {
		if isNotExist(err) { // no data folder yet
			return nil
		}
		return fmt.Errorf("find uncommitted data files: %w", err)
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return err
	}
	removed := 0
	for _, f := range plan.Files() {
		if !tagged(f, tag) {
			continue
		}
		if err := fs.Remove(f); err != nil && !isNotExist(err) {
			return fmt.Errorf("remove uncommitted data file %s: %w", f, err)
		}
		removed++
	}
	if removed > 0 {
		s.log.Info("removed data files of commits that never happened", "count", removed)
	}
	return nil
}
