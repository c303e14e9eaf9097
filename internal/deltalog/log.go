package deltalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Dir is the log's folder in a table.
const Dir = "_delta_log/"

// CommitName is the name of commit version: "a zero-padded 20-digit
// version number with a .json suffix".
func CommitName(version int64) string { return fmt.Sprintf("%s%020d.json", Dir, version) }

// CheckpointName is the name of the classic checkpoint of version.
func CheckpointName(version int64) string {
	return fmt.Sprintf("%s%020d.checkpoint.parquet", Dir, version)
}

// lastCheckpointName points readers at the latest checkpoint, so that
// they need not list the log.
const lastCheckpointName = Dir + "_last_checkpoint"

// ErrVersionExists is matched by Commit's error when another writer
// committed that version first.
var ErrVersionExists = errors.New("version already committed")

// Log is a table's transaction log in a Store. It is safe for concurrent
// use; the snapshots it returns are the caller's.
type Log struct {
	store Store
}

// New returns the log of the table in store.
func New(store Store) *Log { return &Log{store: store} }

// Store returns the log's store.
func (l *Log) Store() Store { return l.store }

// Load returns the table's latest snapshot: the latest classic checkpoint
// (named by _last_checkpoint, or found by listing the log) and the
// commits after it. A table with no commit gives a snapshot of version -1.
func (l *Log) Load(ctx context.Context) (*Snapshot, error) {
	snap := NewSnapshot()
	cp, found, err := l.findCheckpoint(ctx)
	if err != nil {
		return nil, err
	}
	if found {
		data, err := l.store.Read(ctx, CheckpointName(cp))
		if err != nil {
			return nil, fmt.Errorf("checkpoint %d: %w", cp, err)
		}
		if snap, err = DecodeCheckpoint(cp, data); err != nil {
			return nil, err
		}
	}
	if err := l.Update(ctx, snap); err != nil {
		return nil, err
	}
	if snap.Version < 0 {
		// No version 0: a table with no commit, unless the log was
		// cleaned up to a checkpoint of a kind this reader does not take.
		names, err := l.store.List(ctx, Dir)
		if err != nil {
			return nil, err
		}
		for _, n := range names {
			if _, ok := parseVersion(n.Name, ".json"); ok {
				return nil, fmt.Errorf("%s: the log has commits but no version 0 and no classic checkpoint this writer reads (v2 or multi-part checkpoints are not supported)", l.store)
			}
		}
	}
	return snap, nil
}

// findCheckpoint returns the version of the latest classic checkpoint:
// _last_checkpoint's, or the highest found by listing the log when
// _last_checkpoint is missing or names a multi-part checkpoint.
func (l *Log) findCheckpoint(ctx context.Context) (int64, bool, error) {
	data, err := l.store.Read(ctx, lastCheckpointName)
	switch {
	case err == nil:
		var lc LastCheckpoint
		if err := json.Unmarshal(data, &lc); err == nil && lc.Parts == nil {
			return lc.Version, true, nil
		}
	case !isNotExist(err):
		return 0, false, err
	}
	names, err := l.store.List(ctx, Dir)
	if err != nil {
		return 0, false, err
	}
	best, found := int64(-1), false
	for _, n := range names {
		if v, ok := parseVersion(n.Name, ".checkpoint.parquet"); ok && v > best {
			best, found = v, true
		}
	}
	return best, found, nil
}

// parseVersion returns the version of a log file name with suffix.
func parseVersion(name, suffix string) (int64, bool) {
	base, ok := strings.CutPrefix(name, Dir)
	if !ok {
		return 0, false
	}
	digits, ok := strings.CutSuffix(base, suffix)
	if !ok || len(digits) != 20 {
		return 0, false
	}
	v, err := strconv.ParseInt(digits, 10, 64)
	return v, err == nil
}

// Update applies to snap the commits after its version, reading versions
// in turn until one is missing (no listing: a commit file, once created,
// is whole).
func (l *Log) Update(ctx context.Context, snap *Snapshot) error {
	for v := snap.Version + 1; ; v++ {
		data, err := l.store.Read(ctx, CommitName(v))
		if isNotExist(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("commit %d: %w", v, err)
		}
		actions, err := Parse(data)
		if err != nil {
			return fmt.Errorf("%s: commit %d: %w", l.store, v, err)
		}
		if err := snap.Apply(v, actions); err != nil {
			return fmt.Errorf("%s: commit %d: %w", l.store, v, err)
		}
	}
}

// Commit creates commit version with actions, only if no writer created
// it before: it then returns an error matching ErrVersionExists, and the
// caller reads the winner's commit (Update) before deciding what to do.
func (l *Log) Commit(ctx context.Context, version int64, actions []Action) error {
	data, err := Encode(actions)
	if err != nil {
		return fmt.Errorf("commit %d: %w", version, err)
	}
	if err := l.store.Create(ctx, CommitName(version), data); err != nil {
		if errors.Is(err, ErrExists) {
			return fmt.Errorf("commit %d: %w", version, ErrVersionExists)
		}
		return fmt.Errorf("commit %d: %w", version, err)
	}
	return nil
}

// Checkpoint writes the classic checkpoint of snap (which must be the
// state of the log at snap.Version) and then points _last_checkpoint at
// it; now decides which remove tombstones have expired.
func (l *Log) Checkpoint(ctx context.Context, snap *Snapshot, now time.Time) error {
	lc, err := l.WriteCheckpoint(ctx, snap, now)
	if err != nil {
		return err
	}
	return l.SetLastCheckpoint(ctx, lc)
}

// LastCheckpoint is what _last_checkpoint says of a checkpoint.
type LastCheckpoint struct {
	Version       int64  `json:"version"`
	Size          int64  `json:"size"`
	SizeInBytes   int64  `json:"sizeInBytes,omitempty"`
	NumOfAddFiles *int64 `json:"numOfAddFiles,omitempty"`
	Parts         *int   `json:"parts,omitempty"`
}

// WriteCheckpoint writes the classic checkpoint of snap and returns what
// SetLastCheckpoint then records. A crash between the two leaves
// _last_checkpoint at an older checkpoint (or none), which is still
// correct: readers replay the commits after it.
func (l *Log) WriteCheckpoint(ctx context.Context, snap *Snapshot, now time.Time) (LastCheckpoint, error) {
	data, n, err := EncodeCheckpoint(snap, now)
	if err != nil {
		return LastCheckpoint{}, err
	}
	if err := l.store.Put(ctx, CheckpointName(snap.Version), data); err != nil {
		return LastCheckpoint{}, fmt.Errorf("checkpoint %d: %w", snap.Version, err)
	}
	adds := int64(len(snap.Files))
	return LastCheckpoint{Version: snap.Version, Size: n, SizeInBytes: int64(len(data)), NumOfAddFiles: &adds}, nil
}

// SetLastCheckpoint points _last_checkpoint at a checkpoint.
func (l *Log) SetLastCheckpoint(ctx context.Context, lc LastCheckpoint) error {
	data, err := json.Marshal(lc)
	if err != nil {
		return err
	}
	if err := l.store.Put(ctx, lastCheckpointName, data); err != nil {
		return fmt.Errorf("checkpoint %d: _last_checkpoint: %w", lc.Version, err)
	}
	return nil
}

// DefaultLogRetention is how long log entries are kept when the table
// does not set delta.logRetentionDuration ("interval 30 days").
const DefaultLogRetention = 30 * 24 * time.Hour

// LogRetention returns the table's delta.logRetentionDuration.
func LogRetention(m *Metadata) (time.Duration, error) {
	v, ok := m.Configuration["delta.logRetentionDuration"]
	if !ok {
		return DefaultLogRetention, nil
	}
	return ParseInterval(v)
}

// ParseInterval parses a table property's interval: "interval 30 days",
// "interval 12 hours" (units: week, day, hour, minute, second, and their
// plurals).
func ParseInterval(v string) (time.Duration, error) {
	f := strings.Fields(strings.ToLower(v))
	if len(f) == 3 && f[0] == "interval" {
		n, err := strconv.ParseInt(f[1], 10, 64)
		unit := map[string]time.Duration{"week": 7 * 24 * time.Hour, "day": 24 * time.Hour, "hour": time.Hour,
			"minute": time.Minute, "second": time.Second}[strings.TrimSuffix(f[2], "s")]
		if err == nil && n >= 0 && unit > 0 {
			return time.Duration(n) * unit, nil
		}
	}
	return 0, fmt.Errorf("interval %q: want such as \"interval 30 days\"", v)
}

// Cleanup removes the log entries a newer checkpoint makes unneeded and
// the retention lets go ("Metadata Cleanup"): it finds the newest commit
// older than now - retention, the newest checkpoint at or before that
// commit, and removes the commit files, checkpoints and checksum files
// of the versions before that checkpoint. Readers of the latest state
// start at a checkpoint at least that new; time travel to versions older
// than the retention is what it gives up. It returns how many files it
// removed.
func (l *Log) Cleanup(ctx context.Context, now time.Time, retention time.Duration) (int, error) {
	files, err := l.store.List(ctx, Dir)
	if err != nil {
		return 0, err
	}
	cutoff := now.Add(-retention)
	cutCommit := int64(-1)
	var checkpoints []int64
	for _, f := range files {
		if v, ok := parseVersion(f.Name, ".json"); ok && !f.ModTime.After(cutoff) && v > cutCommit {
			cutCommit = v
		}
		if v, ok := parseVersion(f.Name, ".checkpoint.parquet"); ok {
			checkpoints = append(checkpoints, v)
		}
	}
	keep := int64(-1)
	for _, v := range checkpoints {
		if v <= cutCommit && v > keep {
			keep = v
		}
	}
	removed := 0
	for _, f := range files {
		base, ok := strings.CutPrefix(f.Name, Dir)
		if !ok || len(base) < 21 || base[20] != '.' {
			continue // _last_checkpoint, or not a versioned file
		}
		v, err := strconv.ParseInt(base[:20], 10, 64)
		if err != nil || v >= keep {
			continue
		}
		if err := l.store.Remove(ctx, f.Name); err != nil {
			return removed, err
		}
		removed++
	}
	return removed, nil
}
