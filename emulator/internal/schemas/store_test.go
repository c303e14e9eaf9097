package schemas

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const def = `{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}`

// TestTornLastRecordIsDropped: a crash during an append leaves a line
// without its newline; Open drops it, keeps what came before and appends
// after it.
func TestTornLastRecordIsDropped(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	a, _, err := s.RegisterAzure("g", "R", "Avro", def)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, FileName)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"azure":{"id":"half`)
	f.Close()

	s, err = Open(dir)
	if err != nil {
		t.Fatalf("Open after a torn append: %v", err)
	}
	if b, err := os.ReadFile(path); err != nil || strings.Contains(string(b), "half") || !strings.HasSuffix(string(b), "}\n") {
		t.Fatalf("after Open the file still holds the torn record: %q, %v", b, err)
	}
	if got, ok := s.AzureByID(a.ID); !ok || got != a {
		t.Fatalf("AzureByID after the torn append = %+v, %v; want %+v", got, ok, a)
	}
	b, _, err := s.RegisterAzure("g", "R", "Avro", strings.Replace(def, "int", "long", 1))
	if err != nil || b.Version != 2 {
		t.Fatalf("registering after the torn append: %+v, %v", b, err)
	}
	s.Close()
	s, err = Open(dir)
	if err != nil {
		t.Fatalf("Open after appending past the torn record: %v", err)
	}
	defer s.Close()
	if got, ok := s.AzureVersion("g", "R", 2); !ok || got != b {
		t.Fatalf("version 2 = %+v, %v; want %+v", got, ok, b)
	}
}

// TestCorruptRecordIsAnError: a complete line that does not parse is not
// a torn append; Open says where it is instead of dropping schemas.
func TestCorruptRecordIsAnError(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, FileName), []byte("{not json}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("Open of a corrupt file: %v", err)
	}
}
