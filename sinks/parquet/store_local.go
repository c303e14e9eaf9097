package parquet

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/ehsink/ehsink/internal/durable"
)

// localStore keeps files in a local directory. A file is written under a
// hidden temporary name in its final folder, then fsynced, renamed and the
// folder fsynced: after a crash a reader sees the whole file or nothing.
type localStore struct {
	root string
}

func newLocalStore(root string) (*localStore, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("parquet dir %q: %w", root, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("parquet dir %q: %w", root, err)
	}
	return &localStore{root: abs}, nil
}

func (s *localStore) String() string { return "dir " + s.root }

// tempPrefix and tempSuffix frame temporary names: a leading dot hides them
// from readers that follow the Hive convention (Spark, Hive, DuckDB globs).
const (
	tempPrefix = ".ehsink-"
	tempSuffix = ".tmp"
)

func (s *localStore) create(_ context.Context, dir, tag string) (pending, error) {
	full := filepath.Join(s.root, filepath.FromSlash(dir))
	created, err := mkdirAll(full)
	if err != nil {
		return nil, fmt.Errorf("%s: create folder %q: %w", s, dir, err)
	}
	f, err := os.CreateTemp(full, tempPrefix+tag+"-*"+tempSuffix)
	if err != nil {
		return nil, fmt.Errorf("%s: create temporary file in %q: %w", s, dir, err)
	}
	return &localPending{store: s, f: f, name: f.Name(), dir: dir, dirsCreated: created}, nil
}

// mkdirAll is os.MkdirAll that reports whether it created anything, so that
// the new folder entries can be made durable at commit.
func mkdirAll(dir string) (bool, error) {
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		return false, nil
	}
	return true, os.MkdirAll(dir, 0o755)
}

func (s *localStore) list(_ context.Context, prefix string) ([]object, error) {
	var out []object
	start := filepath.Join(s.root, filepath.FromSlash(prefix))
	if prefix == "" {
		start = s.root
	}
	err := filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
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
		name := filepath.ToSlash(rel)
		if !strings.HasPrefix(name, prefix) {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		out = append(out, object{name: name, size: info.Size()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s: list %q: %w", s, prefix, err)
	}
	return out, nil
}

func (s *localStore) remove(_ context.Context, name string) error {
	err := os.Remove(filepath.Join(s.root, filepath.FromSlash(name)))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s: remove %q: %w", s, name, err)
	}
	return nil
}

func (s *localStore) readTail(_ context.Context, name string, size, n int64) ([]byte, error) {
	f, err := os.Open(filepath.Join(s.root, filepath.FromSlash(name)))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s, err)
	}
	defer f.Close()
	n = min(n, size)
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, size-n); err != nil {
		return nil, fmt.Errorf("%s: read %q: %w", s, name, err)
	}
	return buf, nil
}

func (s *localStore) cleanTemps(_ context.Context, prefix, tag string) (int, error) {
	start := filepath.Join(s.root, filepath.FromSlash(prefix))
	removed := 0
	err := filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() || !strings.HasPrefix(d.Name(), tempPrefix+tag+"-") || !strings.HasSuffix(d.Name(), tempSuffix) {
			return nil
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		removed++
		return nil
	})
	if err != nil {
		return removed, fmt.Errorf("%s: clean temporary files under %q: %w", s, prefix, err)
	}
	return removed, nil
}

// localPending is a temporary file waiting for its commit.
type localPending struct {
	store       *localStore
	f           *os.File // nil once closed
	name        string   // the temporary file's full path
	dir         string
	dirsCreated bool
	committed   bool
}

func (p *localPending) Write(b []byte) (int, error) {
	if p.f == nil {
		return 0, fmt.Errorf("%s: write to a closed temporary file", p.store)
	}
	return p.f.Write(b)
}

func (p *localPending) commit(_ context.Context, name string) error {
	if p.committed {
		return nil
	}
	if path.Dir(name) != path.Clean(p.dir) {
		return fmt.Errorf("%s: commit %q: not in the temporary file's folder %q", p.store, name, p.dir)
	}
	if p.f != nil {
		if err := p.f.Sync(); err != nil {
			return fmt.Errorf("%s: fsync %q: %w", p.store, name, err)
		}
		if err := p.f.Close(); err != nil {
			return fmt.Errorf("%s: close %q: %w", p.store, name, err)
		}
	}
	p.f = nil
	final := filepath.Join(p.store.root, filepath.FromSlash(name))
	if err := os.Rename(p.name, final); err != nil {
		return fmt.Errorf("%s: publish %q: %w", p.store, name, err)
	}
	// The rename is durable once the folder is; new folders must reach
	// their parents too, up to the root.
	dir := filepath.Dir(final)
	for {
		if err := durable.SyncDir(dir); err != nil {
			return fmt.Errorf("%s: fsync folder of %q: %w", p.store, name, err)
		}
		if !p.dirsCreated || dir == p.store.root || len(dir) <= len(p.store.root) {
			break
		}
		dir = filepath.Dir(dir)
	}
	p.committed = true
	return nil
}

func (p *localPending) abort() error {
	if p.committed {
		return nil
	}
	if p.f != nil {
		_ = p.f.Close()
		p.f = nil
	}
	if err := os.Remove(p.name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s: remove temporary file: %w", p.store, err)
	}
	return nil
}
