package deltalog

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ehsink/ehsink/internal/durable"
)

// LocalStore is a table in a local directory. A file is written under a
// temporary name in its final folder and fsynced, then linked (Create,
// which link(2) refuses when the name exists) or renamed (Put) to its
// name, and the folder is fsynced: after a crash a file is whole or
// absent, and a commit once acknowledged stays.
type LocalStore struct {
	root string
}

// NewLocalStore returns the store of the table in root, creating root.
func NewLocalStore(root string) (*LocalStore, error) {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("table dir %s: %w", root, err)
	}
	return &LocalStore{root: root}, nil
}

func (s *LocalStore) String() string { return "dir " + s.root }

func (s *LocalStore) path(name string) string { return filepath.Join(s.root, filepath.FromSlash(name)) }

// tempPrefix starts the names of files being written; List skips them.
const tempPrefix = ".ehsink-tmp-"

// List walks the folder of prefix (and below) for names starting with
// prefix.
func (s *LocalStore) List(_ context.Context, prefix string) ([]File, error) {
	dir := path.Dir(prefix)
	if strings.HasSuffix(prefix, "/") {
		dir = strings.TrimSuffix(prefix, "/")
	}
	var out []File
	err := filepath.WalkDir(s.path(dir), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if isNotExist(err) {
				return nil
			}
			return err
		}
		if d.IsDir() || strings.HasPrefix(d.Name(), tempPrefix) {
			return nil
		}
		rel, err := filepath.Rel(s.root, p)
		if err != nil {
			return err
		}
		if name := filepath.ToSlash(rel); strings.HasPrefix(name, prefix) {
			info, err := d.Info()
			if err != nil {
				if isNotExist(err) {
					return nil // removed since the folder was read
				}
				return err
			}
			out = append(out, File{Name: name, Size: info.Size(), ModTime: info.ModTime()})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s: list %s: %w", s, prefix, err)
	}
	slices.SortFunc(out, func(a, b File) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Read reads a file.
func (s *LocalStore) Read(_ context.Context, name string) ([]byte, error) {
	b, err := os.ReadFile(s.path(name))
	if err != nil {
		return nil, fmt.Errorf("%s: read %s: %w", s, name, err)
	}
	return b, nil
}

// Create links a fsynced temporary file to name: link(2) fails with
// EEXIST when name exists, so two writers cannot both create it, and a
// reader never sees a partial commit (O_EXCL on the final name would
// show one while it is written).
func (s *LocalStore) Create(_ context.Context, name string, body []byte) error {
	tmp, err := s.writeTemp(name, body)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, s.path(name)); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s: create %s: %w", s, name, ErrExists)
		}
		return fmt.Errorf("%s: create %s: %w", s, name, err)
	}
	if err := os.Remove(tmp); err != nil {
		return fmt.Errorf("%s: create %s: remove temporary: %w", s, name, err)
	}
	return durable.SyncDir(filepath.Dir(s.path(name)))
}

// Put renames a fsynced temporary file to name.
func (s *LocalStore) Put(_ context.Context, name string, body []byte) error {
	tmp, err := s.writeTemp(name, body)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, s.path(name)); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("%s: put %s: %w", s, name, err)
	}
	return durable.SyncDir(filepath.Dir(s.path(name)))
}

// writeTemp writes body to a fsynced temporary file in name's folder,
// creating the folder (and making its entry durable) if needed.
func (s *LocalStore) writeTemp(name string, body []byte) (string, error) {
	dir := filepath.Dir(s.path(name))
	if err := s.mkdirAll(dir); err != nil {
		return "", fmt.Errorf("%s: write %s: %w", s, name, err)
	}
	f, err := os.CreateTemp(dir, tempPrefix+"*")
	if err != nil {
		return "", fmt.Errorf("%s: write %s: %w", s, name, err)
	}
	_, err = f.Write(body)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return "", fmt.Errorf("%s: write %s: %w", s, name, err)
	}
	return f.Name(), nil
}

// mkdirAll creates dir and fsyncs the parent of each folder it created,
// so that a file linked into a new folder survives a crash.
func (s *LocalStore) mkdirAll(dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	if parent := filepath.Dir(dir); parent != dir {
		if err := s.mkdirAll(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return durable.SyncDir(filepath.Dir(dir))
}

// Remove removes a file.
func (s *LocalStore) Remove(_ context.Context, name string) error {
	if err := os.Remove(s.path(name)); err != nil && !isNotExist(err) {
		return fmt.Errorf("%s: remove %s: %w", s, name, err)
	}
	return nil
}
