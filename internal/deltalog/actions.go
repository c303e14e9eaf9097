package deltalog

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
)

// Action is one line of a commit file: exactly one of its fields is set.
// Actions this package does not model (cdc, domainMetadata, sidecar, ...)
// parse to an Action with every field nil and Unknown set to their key.
type Action struct {
	Protocol   *Protocol      `json:"protocol,omitempty"`
	MetaData   *Metadata      `json:"metaData,omitempty"`
	Add        *Add           `json:"add,omitempty"`
	Remove     *Remove        `json:"remove,omitempty"`
	Txn        *Txn           `json:"txn,omitempty"`
	CommitInfo map[string]any `json:"commitInfo,omitempty"`
	// Unknown is the key of an action this package does not model.
	Unknown string `json:"-"`
}

// Protocol is the protocol action: the versions (and, from reader 3 and
// writer 7, the features) a client must support.
type Protocol struct {
	MinReaderVersion int      `json:"minReaderVersion"`
	MinWriterVersion int      `json:"minWriterVersion"`
	ReaderFeatures   []string `json:"readerFeatures,omitempty"`
	WriterFeatures   []string `json:"writerFeatures,omitempty"`
}

// Metadata is the metaData action: the table's id, schema, partition
// columns and configuration.
type Metadata struct {
	ID               string            `json:"id"`
	Name             string            `json:"name,omitempty"`
	Description      string            `json:"description,omitempty"`
	Format           Format            `json:"format"`
	SchemaString     string            `json:"schemaString"`
	PartitionColumns []string          `json:"partitionColumns"`
	Configuration    map[string]string `json:"configuration"`
	CreatedTime      *int64            `json:"createdTime,omitempty"`
}

// Format is the data files' format: provider "parquet".
type Format struct {
	Provider string            `json:"provider"`
	Options  map[string]string `json:"options"`
}

// Add is the add action: a data file that joins the table. Path is a
// URI relative to the table's root (or absolute).
type Add struct {
	Path             string             `json:"path"`
	PartitionValues  map[string]*string `json:"partitionValues"`
	Size             int64              `json:"size"`
	ModificationTime int64              `json:"modificationTime"`
	DataChange       bool               `json:"dataChange"`
	Stats            string             `json:"stats,omitempty"`
	Tags             map[string]string  `json:"tags,omitempty"`
}

// Remove is the remove action: a data file that leaves the table.
type Remove struct {
	Path              string             `json:"path"`
	DeletionTimestamp *int64             `json:"deletionTimestamp,omitempty"`
	DataChange        bool               `json:"dataChange"`
	PartitionValues   map[string]*string `json:"partitionValues,omitempty"`
	Size              *int64             `json:"size,omitempty"`
}

// Txn is the txn action (SetTransaction): the version an application
// committed up to. A snapshot keeps the latest per AppID.
type Txn struct {
	AppID       string `json:"appId"`
	Version     int64  `json:"version"`
	LastUpdated *int64 `json:"lastUpdated,omitempty"`
}

// Encode returns a commit file: one action per line, newline-delimited
// JSON ("Delta files are stored as JSON in a newline-delimited format").
func Encode(actions []Action) ([]byte, error) {
	var b bytes.Buffer
	for i, a := range actions {
		line, err := json.Marshal(a)
		if err != nil {
			return nil, fmt.Errorf("action %d: %w", i, err)
		}
		if string(line) == "{}" {
			return nil, fmt.Errorf("action %d: empty", i)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.Bytes(), nil
}

// maxLine bounds one action's line; a metaData with a wide schema is the
// longest a table has.
const maxLine = 64 << 20

// Parse reads a commit file. Blank lines are skipped; a line that is not
// a JSON object with exactly one key is an error.
func Parse(data []byte) ([]Action, error) {
	var out []Action
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var keys map[string]json.RawMessage
		if err := json.Unmarshal(line, &keys); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if len(keys) != 1 {
			return nil, fmt.Errorf("line %d: an action has one key, this line %d", n, len(keys))
		}
		var a Action
		if err := json.Unmarshal(line, &a); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if a.Protocol == nil && a.MetaData == nil && a.Add == nil && a.Remove == nil && a.Txn == nil && a.CommitInfo == nil {
			for k, v := range keys {
				if string(v) == "null" {
					return nil, fmt.Errorf("line %d: action %q is null", n, k)
				}
				a.Unknown = k
			}
		}
		out = append(out, a)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}
