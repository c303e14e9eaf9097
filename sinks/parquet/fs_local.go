package parquet

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/ehsink/ehsink/internal/durable"
)

// localFS is what the local store does to the file system, and nothing
// more, so that a test can stand a file system in for the real one whose
// simulated crash forgets what was not made durable (every write not
// fsynced, every folder entry whose folder was not fsynced) and which
// refuses to replace an existing name. The store's durability then shows
// in effects a test can check, not in the steps it traces. Paths are full
// OS paths. Implementations are safe for concurrent use.
type localFS interface {
	// MkdirAll is os.MkdirAll.
	MkdirAll(dir string) error
	// OpenFile is os.OpenFile.
	OpenFile(name string, flag int, perm fs.FileMode) (localFile, error)
	// ReadFile is os.ReadFile.
	ReadFile(name string) ([]byte, error)
	// Link is os.Link: it fails with fs.ErrExist when newname exists.
	Link(oldname, newname string) error
	// Remove is os.Remove.
	Remove(name string) error
	// Stat is os.Stat.
	Stat(name string) (fs.FileInfo, error)
	// WalkDir is filepath.WalkDir.
	WalkDir(root string, fn fs.WalkDirFunc) error
	// SyncDir makes the entries of the folder dir durable.
	SyncDir(dir string) error
}

// localFile is an open file of a localFS.
type localFile interface {
	io.Writer
	io.ReaderAt
	// Sync makes the file's bytes durable.
	Sync() error
	Close() error
	Name() string
}

// osFS is the real file system.
type osFS struct{}

func (osFS) MkdirAll(dir string) error { return os.MkdirAll(dir, 0o755) }
func (osFS) OpenFile(name string, flag int, perm fs.FileMode) (localFile, error) {
	return os.OpenFile(name, flag, perm)
}
func (osFS) ReadFile(name string) ([]byte, error)         { return os.ReadFile(name) }
func (osFS) Link(oldname, newname string) error           { return os.Link(oldname, newname) }
func (osFS) Remove(name string) error                     { return os.Remove(name) }
func (osFS) Stat(name string) (fs.FileInfo, error)        { return os.Stat(name) }
func (osFS) WalkDir(root string, fn fs.WalkDirFunc) error { return filepath.WalkDir(root, fn) }
func (osFS) SyncDir(dir string) error                     { return durable.SyncDir(dir) }
