package durable

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestSyncDir(t *testing.T) {
	dir := t.TempDir()
	if err := SyncDir(dir); err != nil {
		t.Fatalf("SyncDir(%s): %v", dir, err)
	}
	missing := filepath.Join(dir, "missing")
	if err := SyncDir(missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("SyncDir of a missing directory = %v, want an error naming it", err)
	}
}
