// Package schemas is the storage layer of the emulator's schema registries:
// Azure Schema Registry schemas (groups, names, versions, 32-hex-digit ids)
// and Confluent-compatible subjects (versions, integer ids, subject
// compatibility settings). It knows nothing of HTTP; package emulator
// serves it. It uses only the standard library.
//
// # Identity
//
// Two definitions are the same schema when their compact JSON forms are
// equal (whitespace between JSON tokens does not count; the Custom format,
// which need not be JSON, compares byte for byte). Registering the same
// schema again under the same name (Azure) or subject (Confluent) returns
// the existing id and version; another definition adds the next version
// with a new id. A Confluent id names one definition across subjects, as
// Confluent's registry does.
//
// # Persistence
//
// With a directory, every change is appended to dir/$schemas.jsonl (one JSON
// record a line) and fsynced before the call returns: producers put the id
// they were given into events that outlive the emulator, so an id must
// never be handed out and then forgotten by a crash. Open replays the file;
// a torn last line (a crash during an append) is truncated away. Hub names
// cannot contain '$', so the file never collides with a hub's directory.
//
// A Store is safe for concurrent use.
package schemas

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
)

// FileName is the name of the store's file in its directory.
const FileName = "$schemas.jsonl"

// Azure is one version of an Azure Schema Registry schema.
type Azure struct {
	ID         string `json:"id"`
	Group      string `json:"group"`
	Name       string `json:"name"`
	Version    int    `json:"version"`
	Format     string `json:"format"` // Avro, Json or Custom
	Definition string `json:"definition"`
}

// Confluent is one version of a Confluent subject.
type Confluent struct {
	Subject    string `json:"subject"`
	Version    int    `json:"version"`
	ID         int    `json:"id"`
	SchemaType string `json:"schemaType"` // AVRO
	Schema     string `json:"schema"`
}

// record is one line of the store's file.
type record struct {
	Azure     *Azure     `json:"azure,omitempty"`
	Confluent *Confluent `json:"confluent,omitempty"`
	// Config sets a Confluent subject's compatibility level.
	Config *subjectConfig `json:"config,omitempty"`
}

type subjectConfig struct {
	Subject       string `json:"subject"`
	Compatibility string `json:"compatibility"`
}

type azureKey struct{ group, name string }

// Store holds the schemas of both registries.
type Store struct {
	mu sync.Mutex // guards everything below
	f  *os.File   // the store's file; nil in memory

	azureByID   map[string]*Azure
	azureByName map[azureKey][]*Azure // versions in order, version i+1 at i

	confluentIDs       map[int]string // id -> the definition as first registered
	confluentIDByKey   map[string]int // identity key -> id
	confluentTypes     map[int]string // id -> schema type
	confluentSubjects  map[string][]*Confluent
	confluentCompat    map[string]string // subject -> compatibility level
	confluentSubjOrder []string          // subjects in first-registration order
}

// Open returns a store kept in dir, replaying what an earlier store wrote
// there; with dir "" it keeps schemas in memory only. Close releases the
// file.
func Open(dir string) (*Store, error) {
	s := &Store{
		azureByID:         map[string]*Azure{},
		azureByName:       map[azureKey][]*Azure{},
		confluentIDs:      map[int]string{},
		confluentIDByKey:  map[string]int{},
		confluentTypes:    map[int]string{},
		confluentSubjects: map[string][]*Confluent{},
		confluentCompat:   map[string]string{},
	}
	if dir == "" {
		return s, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("schema store: %w", err)
	}
	path := filepath.Join(dir, FileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("schema store: %w", err)
	}
	if err := s.replay(f, path); err != nil {
		f.Close()
		return nil, err
	}
	s.f = f
	return s, nil
}

// replay applies every record of f and truncates a torn last line, leaving
// f positioned at its end.
func (s *Store) replay(f *os.File, path string) error {
	r := bufio.NewReader(f)
	var good int64
	for lineNo := 1; ; lineNo++ {
		line, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			if len(line) > 0 {
				// A line without its newline is an append a crash cut short:
				// it was never acknowledged, so it is dropped.
				if err := f.Truncate(good); err != nil {
					return fmt.Errorf("schema store: %s: truncating a torn last record: %w", path, err)
				}
			}
			break
		}
		if err != nil {
			return fmt.Errorf("schema store: %s: %w", path, err)
		}
		var rec record
		if err := json.Unmarshal(line, &rec); err != nil {
			return fmt.Errorf("schema store: %s line %d: %w", path, lineNo, err)
		}
		if err := s.apply(rec); err != nil {
			return fmt.Errorf("schema store: %s line %d: %w", path, lineNo, err)
		}
		good += int64(len(line))
	}
	if _, err := f.Seek(good, io.SeekStart); err != nil {
		return fmt.Errorf("schema store: %s: %w", path, err)
	}
	return nil
}

// apply adds a record to the maps (Open's replay and every change).
func (s *Store) apply(rec record) error {
	switch {
	case rec.Azure != nil:
		a := rec.Azure
		k := azureKey{a.Group, a.Name}
		if a.Version != len(s.azureByName[k])+1 || s.azureByID[a.ID] != nil {
			return fmt.Errorf("azure schema %s/%s version %d (id %s) out of sequence", a.Group, a.Name, a.Version, a.ID)
		}
		s.azureByName[k] = append(s.azureByName[k], a)
		s.azureByID[a.ID] = a
	case rec.Confluent != nil:
		c := rec.Confluent
		if c.Version != len(s.confluentSubjects[c.Subject])+1 {
			return fmt.Errorf("confluent subject %q version %d out of sequence", c.Subject, c.Version)
		}
		if _, ok := s.confluentIDs[c.ID]; !ok {
			s.confluentIDs[c.ID] = c.Schema
			s.confluentTypes[c.ID] = c.SchemaType
			s.confluentIDByKey[identity(c.SchemaType, c.Schema)] = c.ID
		}
		if len(s.confluentSubjects[c.Subject]) == 0 {
			s.confluentSubjOrder = append(s.confluentSubjOrder, c.Subject)
		}
		s.confluentSubjects[c.Subject] = append(s.confluentSubjects[c.Subject], c)
	case rec.Config != nil:
		s.confluentCompat[rec.Config.Subject] = rec.Config.Compatibility
	default:
		return errors.New("empty record")
	}
	return nil
}

// commitLocked writes rec to the file (when there is one), syncs it, then
// applies it.
func (s *Store) commitLocked(rec record) error {
	if s.f != nil {
		line, err := json.Marshal(rec)
		if err != nil {
			return fmt.Errorf("schema store: %w", err)
		}
		if _, err := s.f.Write(append(line, '\n')); err != nil {
			return fmt.Errorf("schema store: write %s: %w", s.f.Name(), err)
		}
		if err := s.f.Sync(); err != nil {
			return fmt.Errorf("schema store: sync %s: %w", s.f.Name(), err)
		}
	}
	return s.apply(rec)
}

// identity is the key two definitions of one format share when they are
// the same schema: the compact JSON form, or the bytes of a non-JSON one.
func identity(format, definition string) string {
	var b bytes.Buffer
	if format != "Custom" && json.Compact(&b, []byte(definition)) == nil {
		return format + "\x00" + b.String()
	}
	return format + "\x00" + definition
}

// RegisterAzure returns the version of group/name whose definition is
// the same schema as definition, or adds the next version with a new id.
// created reports whether it added one.
func (s *Store) RegisterAzure(group, name, format, definition string) (a Azure, created bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.lookupAzureLocked(group, name, format, definition); ok {
		return old, false, nil
	}
	id, err := newAzureID()
	if err != nil {
		return Azure{}, false, err
	}
	k := azureKey{group, name}
	a = Azure{ID: id, Group: group, Name: name, Version: len(s.azureByName[k]) + 1, Format: format, Definition: definition}
	if err := s.commitLocked(record{Azure: &a}); err != nil {
		return Azure{}, false, err
	}
	return a, true, nil
}

// LookupAzure finds the version of group/name that is the same schema as
// definition.
func (s *Store) LookupAzure(group, name, format, definition string) (Azure, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lookupAzureLocked(group, name, format, definition)
}

func (s *Store) lookupAzureLocked(group, name, format, definition string) (Azure, bool) {
	want := identity(format, definition)
	for _, a := range s.azureByName[azureKey{group, name}] {
		if identity(a.Format, a.Definition) == want {
			return *a, true
		}
	}
	return Azure{}, false
}

// AzureByID returns the schema with the id.
func (s *Store) AzureByID(id string) (Azure, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.azureByID[id]
	if !ok {
		return Azure{}, false
	}
	return *a, true
}

// AzureVersion returns version v (from 1) of group/name.
func (s *Store) AzureVersion(group, name string, v int) (Azure, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	versions := s.azureByName[azureKey{group, name}]
	if v < 1 || v > len(versions) {
		return Azure{}, false
	}
	return *versions[v-1], true
}

// newAzureID makes an id as the service's: a random GUID's 32 lowercase
// hex digits.
func newAzureID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("schema store: new id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// RegisterConfluent returns the version of subject that is the same schema
// as schema, or adds the next version, with the schema's existing id when
// another subject holds it, else the next id (from 1).
func (s *Store) RegisterConfluent(subject, schemaType, schema string) (c Confluent, created bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.lookupConfluentLocked(subject, schemaType, schema); ok {
		return old, false, nil
	}
	id, ok := s.confluentIDByKey[identity(schemaType, schema)]
	if !ok {
		id = len(s.confluentIDs) + 1
	}
	c = Confluent{Subject: subject, Version: len(s.confluentSubjects[subject]) + 1, ID: id, SchemaType: schemaType, Schema: schema}
	if err := s.commitLocked(record{Confluent: &c}); err != nil {
		return Confluent{}, false, err
	}
	return c, true, nil
}

// LookupConfluent finds the version of subject that is the same schema as
// schema. subjectKnown reports whether the subject has any version.
func (s *Store) LookupConfluent(subject, schemaType, schema string) (c Confluent, found, subjectKnown bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, found = s.lookupConfluentLocked(subject, schemaType, schema)
	return c, found, len(s.confluentSubjects[subject]) > 0
}

func (s *Store) lookupConfluentLocked(subject, schemaType, schema string) (Confluent, bool) {
	want := identity(schemaType, schema)
	for _, c := range s.confluentSubjects[subject] {
		if identity(c.SchemaType, c.Schema) == want {
			return *c, true
		}
	}
	return Confluent{}, false
}

// ConfluentByID returns the definition and type of the schema with the id.
func (s *Store) ConfluentByID(id int) (schema, schemaType string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	schema, ok = s.confluentIDs[id]
	return schema, s.confluentTypes[id], ok
}

// ConfluentVersion returns version v (from 1; -1 is the latest) of
// subject. subjectKnown reports whether the subject has any version.
func (s *Store) ConfluentVersion(subject string, v int) (c Confluent, found, subjectKnown bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	versions := s.confluentSubjects[subject]
	if v == -1 {
		v = len(versions)
	}
	if v < 1 || v > len(versions) {
		return Confluent{}, false, len(versions) > 0
	}
	return *versions[v-1], true, true
}

// ConfluentVersions lists the version numbers of subject (nil if unknown).
func (s *Store) ConfluentVersions(subject string) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int
	for _, c := range s.confluentSubjects[subject] {
		out = append(out, c.Version)
	}
	return out
}

// Subjects lists the Confluent subjects in the order they were first
// registered.
func (s *Store) Subjects() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.confluentSubjOrder)
}

// SubjectCompatibility returns the compatibility level set on subject.
func (s *Store) SubjectCompatibility(subject string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	level, ok := s.confluentCompat[subject]
	return level, ok
}

// SetSubjectCompatibility records subject's compatibility level.
func (s *Store) SetSubjectCompatibility(subject, level string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.commitLocked(record{Config: &subjectConfig{Subject: subject, Compatibility: level}})
}

// Close closes the store's file. It is idempotent.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	if err != nil {
		return fmt.Errorf("schema store: close: %w", err)
	}
	return nil
}
