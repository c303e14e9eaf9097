package deltalog

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// Snapshot is a table's state at one version: the latest protocol and
// metadata, the live data files and the latest txn of each application.
// A Snapshot is not safe for concurrent use; Clone gives a copy to share.
type Snapshot struct {
	// Version is the last version applied; -1 for a table with no commit.
	Version  int64
	Protocol *Protocol
	Metadata *Metadata
	// Files are the live data files by path ("the add action of a path
	// that a later remove removes is no longer live").
	Files map[string]*Add
	// Tombstones are the removed files by path: a checkpoint keeps them
	// until they expire, so that VACUUM keeps the files older versions
	// still read.
	Tombstones map[string]*Remove
	// Txns are the latest txn of each appId.
	Txns map[string]Txn
}

// NewSnapshot returns the state of a table with no commit.
func NewSnapshot() *Snapshot {
	return &Snapshot{Version: -1, Files: map[string]*Add{}, Tombstones: map[string]*Remove{}, Txns: map[string]Txn{}}
}

// Clone returns a copy whose maps the caller may change.
func (s *Snapshot) Clone() *Snapshot {
	c := *s
	c.Files = make(map[string]*Add, len(s.Files))
	for k, v := range s.Files {
		c.Files[k] = v
	}
	c.Tombstones = make(map[string]*Remove, len(s.Tombstones))
	for k, v := range s.Tombstones {
		c.Tombstones[k] = v
	}
	c.Txns = make(map[string]Txn, len(s.Txns))
	for k, v := range s.Txns {
		c.Txns[k] = v
	}
	return &c
}

// TxnVersion returns the version appID committed up to, and whether it
// committed at all.
func (s *Snapshot) TxnVersion(appID string) (int64, bool) {
	t, ok := s.Txns[appID]
	return t.Version, ok
}

// Apply folds the actions of commit version into s. Versions must come
// in order, each once ("delta files ... must be contiguous").
func (s *Snapshot) Apply(version int64, actions []Action) error {
	if version != s.Version+1 {
		return fmt.Errorf("version %d after %d: the log has a gap", version, s.Version)
	}
	for _, a := range actions {
		switch {
		case a.Protocol != nil:
			p := *a.Protocol
			s.Protocol = &p
		case a.MetaData != nil:
			m := *a.MetaData
			s.Metadata = &m
		case a.Add != nil:
			p := canonicalPath(a.Add.Path)
			s.Files[p] = a.Add
			delete(s.Tombstones, p)
		case a.Remove != nil:
			p := canonicalPath(a.Remove.Path)
			delete(s.Files, p)
			s.Tombstones[p] = a.Remove
		case a.Txn != nil:
			s.Txns[a.Txn.AppID] = *a.Txn
		}
	}
	if version == 0 && (s.Protocol == nil || s.Metadata == nil) {
		return errors.New("version 0 lacks a protocol or metaData action")
	}
	s.Version = version
	return nil
}

// canonicalPath is the key of a file in a snapshot: readers "must
// URI-decode" paths before comparing them, so add and remove actions that
// encode one path differently name one file.
func canonicalPath(p string) string {
	if d, err := url.PathUnescape(p); err == nil {
		return d
	}
	return p
}

// SortedFiles returns the live files sorted by path.
func (s *Snapshot) SortedFiles() []*Add {
	out := make([]*Add, 0, len(s.Files))
	for _, a := range s.Files {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b *Add) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// Writer protocol this package writes: reader 1, writer 2 ("writer
// version 2: support delta.appendOnly and column invariants"), no table
// features. Fabric's SQL endpoint, Synapse serverless and Azure Data
// Explorer read it.
const (
	ReaderVersion = 1
	WriterVersion = 2
)

// knownWriterFeatures are the writer features of a table this append-only
// writer honours: appendOnly (it never removes rows) and invariants (it
// writes no column that has one; CheckColumns refuses those).
var knownWriterFeatures = []string{"appendOnly", "invariants"}

// ErrProtocol is matched by the error of a table whose protocol this
// writer does not support.
var ErrProtocol = errors.New("table protocol not supported by this writer")

// CheckWritable reports whether a table of protocol p may be appended to
// by this writer: reader version 1 (or 3 without reader features), writer
// 2 or lower, or 7 with only known writer features. Writer versions 3 to
// 6 bring check constraints, change data feed, generated columns, column
// mapping and identity columns, which a writer must honour.
func CheckWritable(p *Protocol) error {
	if p == nil {
		return fmt.Errorf("%w: no protocol action", ErrProtocol)
	}
	switch {
	case p.MinReaderVersion == 1:
	case p.MinReaderVersion == 3 && len(p.ReaderFeatures) == 0:
	default:
		return fmt.Errorf("%w: minReaderVersion %d with reader features %v (this writer knows reader version 1)", ErrProtocol, p.MinReaderVersion, p.ReaderFeatures)
	}
	switch {
	case p.MinWriterVersion <= WriterVersion:
	case p.MinWriterVersion == 7:
		for _, f := range p.WriterFeatures {
			if !slices.Contains(knownWriterFeatures, f) {
				return fmt.Errorf("%w: writer feature %q (this writer knows %s)", ErrProtocol, f, strings.Join(knownWriterFeatures, ", "))
			}
		}
	default:
		return fmt.Errorf("%w: minWriterVersion %d (this writer supports up to %d)", ErrProtocol, p.MinWriterVersion, WriterVersion)
	}
	return nil
}

// StructField is a field of a table's schema (the schemaString's
// "fields"). Type is a primitive type's name ("long", "decimal(10,2)"),
// or a nested type as raw JSON.
type StructField struct {
	Name     string          `json:"name"`
	Type     json.RawMessage `json:"type"`
	Nullable bool            `json:"nullable"`
	Metadata map[string]any  `json:"metadata"`
}

// TypeName returns the field's primitive type name, or "" for a nested
// type (struct, array, map).
func (f StructField) TypeName() string {
	var s string
	if json.Unmarshal(f.Type, &s) != nil {
		return ""
	}
	return s
}

// PrimitiveField returns a field of a primitive type.
func PrimitiveField(name, typ string, nullable bool) StructField {
	t, _ := json.Marshal(typ)
	return StructField{Name: name, Type: t, Nullable: nullable, Metadata: map[string]any{}}
}

type structType struct {
	Type   string        `json:"type"`
	Fields []StructField `json:"fields"`
}

// SchemaString returns the schemaString of a struct of fields.
func SchemaString(fields []StructField) (string, error) {
	b, err := json.Marshal(structType{Type: "struct", Fields: fields})
	return string(b), err
}

// ParseSchema returns the fields of a schemaString.
func ParseSchema(schema string) ([]StructField, error) {
	var st structType
	if err := json.Unmarshal([]byte(schema), &st); err != nil {
		return nil, fmt.Errorf("schemaString: %w", err)
	}
	if st.Type != "struct" {
		return nil, fmt.Errorf("schemaString: type %q, want struct", st.Type)
	}
	return st.Fields, nil
}
