package deltalog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	pq "github.com/parquet-go/parquet-go"
)

// A classic checkpoint is one Parquet file whose rows are actions, one
// per row, in a struct column per action type ("Checkpoint Format"):
// protocol, metaData, the txn of every appId, and every live add. Column
// and field names are the actions' JSON names, which is how readers find
// them; fields they do not know they ignore.
type checkpointRow struct {
	Txn      *checkpointTxn      `parquet:"txn,optional"`
	Add      *checkpointAdd      `parquet:"add,optional"`
	Remove   *checkpointRemove   `parquet:"remove,optional"`
	MetaData *checkpointMetadata `parquet:"metaData,optional"`
	Protocol *checkpointProtocol `parquet:"protocol,optional"`
}

type checkpointTxn struct {
	AppID       string `parquet:"appId"`
	Version     int64  `parquet:"version"`
	LastUpdated *int64 `parquet:"lastUpdated,optional"`
}

type checkpointAdd struct {
	Path             string            `parquet:"path"`
	PartitionValues  map[string]string `parquet:"partitionValues"`
	Size             int64             `parquet:"size"`
	ModificationTime int64             `parquet:"modificationTime"`
	DataChange       bool              `parquet:"dataChange"`
	Stats            *string           `parquet:"stats,optional"`
}

type checkpointRemove struct {
	Path              string `parquet:"path"`
	DeletionTimestamp *int64 `parquet:"deletionTimestamp,optional"`
	DataChange        bool   `parquet:"dataChange"`
}

type checkpointFormat struct {
	Provider string            `parquet:"provider"`
	Options  map[string]string `parquet:"options"`
}

type checkpointMetadata struct {
	ID               string            `parquet:"id"`
	Name             *string           `parquet:"name,optional"`
	Description      *string           `parquet:"description,optional"`
	Format           checkpointFormat  `parquet:"format"`
	SchemaString     string            `parquet:"schemaString"`
	PartitionColumns []string          `parquet:"partitionColumns,list"`
	Configuration    map[string]string `parquet:"configuration"`
	CreatedTime      *int64            `parquet:"createdTime,optional"`
}

type checkpointProtocol struct {
	MinReaderVersion int32    `parquet:"minReaderVersion"`
	MinWriterVersion int32    `parquet:"minWriterVersion"`
	ReaderFeatures   []string `parquet:"readerFeatures,optional,list"`
	WriterFeatures   []string `parquet:"writerFeatures,optional,list"`
}

// DefaultTombstoneRetention is how long a remove tombstone is kept when
// the table does not set delta.deletedFileRetentionDuration ("interval 1
// week").
const DefaultTombstoneRetention = 7 * 24 * time.Hour

// EncodeCheckpoint returns the classic checkpoint of s and how many
// actions (rows) it holds. Remove tombstones younger than the table's
// delta.deletedFileRetentionDuration at now are kept. Partition values must not be null: a
// checkpoint keeps them as a map of strings (the sink's partition columns
// are not nullable).
func EncodeCheckpoint(s *Snapshot, now time.Time) ([]byte, int64, error) {
	if s.Protocol == nil || s.Metadata == nil {
		return nil, 0, errors.New("checkpoint: the snapshot has no protocol or metaData")
	}
	p, m := s.Protocol, s.Metadata
	rows := []checkpointRow{
		{Protocol: &checkpointProtocol{MinReaderVersion: int32(p.MinReaderVersion), MinWriterVersion: int32(p.MinWriterVersion),
			ReaderFeatures: p.ReaderFeatures, WriterFeatures: p.WriterFeatures}},
		{MetaData: &checkpointMetadata{ID: m.ID, Name: optString(m.Name), Description: optString(m.Description),
			Format:       checkpointFormat{Provider: m.Format.Provider, Options: nonNil(m.Format.Options)},
			SchemaString: m.SchemaString, PartitionColumns: m.PartitionColumns, Configuration: nonNil(m.Configuration), CreatedTime: m.CreatedTime}},
	}
	for _, t := range sortedTxns(s) {
		rows = append(rows, checkpointRow{Txn: &checkpointTxn{AppID: t.AppID, Version: t.Version, LastUpdated: t.LastUpdated}})
	}
	for _, a := range s.SortedFiles() {
		pv := make(map[string]string, len(a.PartitionValues))
		for k, v := range a.PartitionValues {
			if v == nil {
				return nil, 0, fmt.Errorf("checkpoint: file %s: partition column %s is null", a.Path, k)
			}
			pv[k] = *v
		}
		rows = append(rows, checkpointRow{Add: &checkpointAdd{Path: a.Path, PartitionValues: pv, Size: a.Size,
			ModificationTime: a.ModificationTime, DataChange: false, Stats: optString(a.Stats)}})
	}
	keep := DefaultTombstoneRetention
	if v, ok := m.Configuration["delta.deletedFileRetentionDuration"]; ok {
		d, err := ParseInterval(v)
		if err != nil {
			return nil, 0, fmt.Errorf("checkpoint: delta.deletedFileRetentionDuration: %w", err)
		}
		keep = d
	}
	paths := slices.Sorted(maps.Keys(s.Tombstones))
	for _, p := range paths {
		r := s.Tombstones[p]
		if r.DeletionTimestamp != nil && time.UnixMilli(*r.DeletionTimestamp).Before(now.Add(-keep)) {
			continue // expired
		}
		rows = append(rows, checkpointRow{Remove: &checkpointRemove{Path: r.Path, DeletionTimestamp: r.DeletionTimestamp, DataChange: false}})
	}
	var b bytes.Buffer
	// A new writer per checkpoint: parquet-go v0.32.0's Reset drops
	// path_in_schema from the files written after it (DESIGN.md).
	w := pq.NewGenericWriter[checkpointRow](&b, pq.Compression(&pq.Snappy))
	if _, err := w.Write(rows); err != nil {
		return nil, 0, fmt.Errorf("checkpoint: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, 0, fmt.Errorf("checkpoint: %w", err)
	}
	return b.Bytes(), int64(len(rows)), nil
}

// DecodeCheckpoint returns the snapshot of version held by a classic
// checkpoint (one this package wrote, or another engine's: columns are
// found by name).
func DecodeCheckpoint(version int64, data []byte) (*Snapshot, error) {
	r := pq.NewGenericReader[checkpointRow](bytes.NewReader(data))
	defer r.Close()
	s := NewSnapshot()
	buf := make([]checkpointRow, 256)
	for {
		n, err := r.Read(buf)
		for _, row := range buf[:n] {
			if err := s.applyCheckpointRow(row); err != nil {
				return nil, err
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("checkpoint %d: %w", version, err)
		}
		clear(buf)
	}
	if s.Protocol == nil || s.Metadata == nil {
		return nil, fmt.Errorf("checkpoint %d: no protocol or metaData row", version)
	}
	s.Version = version
	return s, nil
}

func (s *Snapshot) applyCheckpointRow(row checkpointRow) error {
	switch {
	case row.Protocol != nil:
		p := row.Protocol
		s.Protocol = &Protocol{MinReaderVersion: int(p.MinReaderVersion), MinWriterVersion: int(p.MinWriterVersion),
			ReaderFeatures: p.ReaderFeatures, WriterFeatures: p.WriterFeatures}
	case row.MetaData != nil:
		m := row.MetaData
		s.Metadata = &Metadata{ID: m.ID, Name: deref(m.Name), Description: deref(m.Description),
			Format:       Format{Provider: m.Format.Provider, Options: m.Format.Options},
			SchemaString: m.SchemaString, PartitionColumns: m.PartitionColumns, Configuration: m.Configuration, CreatedTime: m.CreatedTime}
	case row.Txn != nil:
		s.Txns[row.Txn.AppID] = Txn{AppID: row.Txn.AppID, Version: row.Txn.Version, LastUpdated: row.Txn.LastUpdated}
	case row.Add != nil:
		a := row.Add
		pv := make(map[string]*string, len(a.PartitionValues))
		for k, v := range a.PartitionValues {
			pv[k] = &v
		}
		s.Files[canonicalPath(a.Path)] = &Add{Path: a.Path, PartitionValues: pv, Size: a.Size,
			ModificationTime: a.ModificationTime, DataChange: a.DataChange, Stats: deref(a.Stats)}
	}
	if row.Remove != nil {
		r := row.Remove
		s.Tombstones[canonicalPath(r.Path)] = &Remove{Path: r.Path, DeletionTimestamp: r.DeletionTimestamp, DataChange: r.DataChange}
	}
	return nil
}

func sortedTxns(s *Snapshot) []Txn {
	out := make([]Txn, 0, len(s.Txns))
	for _, t := range s.Txns {
		out = append(out, t)
	}
	// Sorted by appId: a checkpoint of one state is the same bytes.
	slices.SortFunc(out, func(a, b Txn) int { return strings.Compare(a.AppID, b.AppID) })
	return out
}

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}
