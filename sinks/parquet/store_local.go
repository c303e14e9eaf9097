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
)

// localStore keeps files in a local directory. A file is written under a
// hidden temporary name in its final folder, fsynced, then published with
// link(2), which fails rather than replace an existing name, the temporary
// name removed and the folder fsynced: after a crash a reader sees the
// whole file or nothing, and a name is published once.
type localStore struct {
	root string
	fs   localFS // the real file system, or a test's (fs_local.go)
	// trace, when set (by tests only), is told of every step that makes a
	// commit durable, before the step: "write" and "fsync" of a temporary
	// file, "claim" (the exclusive link of a claim), "link" (publishing),
	// "unlink" of a temporary name, "fsync-dir", and "remove" of a
	// committed object (a claim of a published commit, say).
	trace func(step, path string)
}

func (s *localStore) step(step, path string) {
	if s.trace != nil {
		s.trace(step, path)
	}
}

func newLocalStore(root string) (*localStore, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("parquet dir %q: %w", root, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("parquet dir %q: %w", root, err)
	}
	return &localStore{root: abs, fs: osFS{}}, nil
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
	created, err := s.mkdirAll(full)
	if err != nil {
		return nil, fmt.Errorf("%s: create folder %q: %w", s, dir, err)
	}
	f, err := s.createTemp(full, tag)
	if err != nil {
		return nil, fmt.Errorf("%s: create temporary file in %q: %w", s, dir, err)
	}
	return &localPending{store: s, f: f, name: f.Name(), dir: dir, dirsCreated: created}, nil
}

// mkdirAll is os.MkdirAll that reports whether it created anything, so that
// the new folder entries can be made durable at commit.
func (s *localStore) mkdirAll(dir string) (bool, error) {
	if fi, err := s.fs.Stat(dir); err == nil && fi.IsDir() {
		return false, nil
	}
	return true, s.fs.MkdirAll(dir)
}

// createTemp creates a new hidden temporary file in dir, exclusively,
// named after tag.
func (s *localStore) createTemp(dir, tag string) (localFile, error) {
	for {
		name := filepath.Join(dir, tempPrefix+tag+"-"+randomHex(8)+tempSuffix)
		f, err := s.fs.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, fs.ErrExist) {
			continue // 64 random bits taken: draw again
		}
		return f, err
	}
}

func (s *localStore) list(_ context.Context, prefix string) ([]object, error) {
	var out []object
	start := filepath.Join(s.root, filepath.FromSlash(prefix))
	if prefix == "" {
		start = s.root
	}
	err := s.fs.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
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
	full := filepath.Join(s.root, filepath.FromSlash(name))
	s.step("remove", full)
	err := s.fs.Remove(full)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s: remove %q: %w", s, name, err)
	}
	return nil
}

func (s *localStore) readTail(_ context.Context, name string, size, n int64) ([]byte, error) {
	f, err := s.fs.OpenFile(filepath.Join(s.root, filepath.FromSlash(name)), os.O_RDONLY, 0)
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
	err := s.fs.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() || !strings.HasPrefix(d.Name(), tempPrefix+tag+"-") || !strings.HasSuffix(d.Name(), tempSuffix) {
			return nil
		}
		if err := s.fs.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
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
	f           localFile // nil once closed
	name        string    // the temporary file's full path
	dir         string
	dirsCreated bool
	committed   bool
}

func (p *localPending) Write(b []byte) (int, error) {
	if p.f == nil {
		return 0, fmt.Errorf("%s: write to a closed temporary file", p.store)
	}
	p.store.step("write", p.name)
	return p.f.Write(b)
}

func (p *localPending) prepare(_ context.Context, name string) (string, error) {
	if path.Dir(name) != path.Clean(p.dir) {
		return "", fmt.Errorf("%s: commit %q: not in the temporary file's folder %q", p.store, name, p.dir)
	}
	if p.f != nil {
		p.store.step("fsync", p.name)
		if err := p.f.Sync(); err != nil {
			return "", fmt.Errorf("%s: fsync %q: %w", p.store, name, err)
		}
		if err := p.f.Close(); err != nil {
			return "", fmt.Errorf("%s: close %q: %w", p.store, name, err)
		}
		p.f = nil
	}
	rel, err := filepath.Rel(p.store.root, p.name)
	if err != nil {
		return "", err
	}
	return filepath.ToSlash(rel), nil
}

func (p *localPending) commit(ctx context.Context, name string) error {
	if p.committed {
		return nil
	}
	if _, err := p.prepare(ctx, name); err != nil {
		return err
	}
	if err := p.store.link(p.name, name, p.dirsCreated); err != nil {
		return err
	}
	p.committed = true
	return nil
}

func (s *localStore) publish(_ context.Context, ref, name string) error {
	return s.link(filepath.Join(s.root, filepath.FromSlash(ref)), name, true)
}

// link publishes the file temp under name and removes the temporary name.
// A name already there was published from the same claim; a temporary
// file that is gone while the name is not there is errGone. The check of
// the temporary file comes first: once it is gone, nobody can publish it.
func (s *localStore) link(temp, name string, dirsCreated bool) error {
	final := filepath.Join(s.root, filepath.FromSlash(name))
	s.step("link", final)
	err := s.fs.Link(temp, final)
	switch {
	case err == nil, errors.Is(err, fs.ErrExist):
	case errors.Is(err, fs.ErrNotExist):
		if _, serr := s.fs.Stat(final); serr != nil {
			return fmt.Errorf("%s: publish %q: %w", s, name, errGone)
		}
	default:
		return fmt.Errorf("%s: publish %q: %w", s, name, err)
	}
	s.step("unlink", temp)
	if err := s.fs.Remove(temp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s: publish %q: remove temporary name: %w", s, name, err)
	}
	return s.syncDirs(filepath.Dir(final), dirsCreated)
}

// syncDirs makes dir's entries durable, and, when folders were created
// for them, their parents' up to the root.
func (s *localStore) syncDirs(dir string, created bool) error {
	for {
		s.step("fsync-dir", dir)
		if err := s.fs.SyncDir(dir); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
		if !created || dir == s.root || len(dir) <= len(s.root) {
			return nil
		}
		dir = filepath.Dir(dir)
	}
}

func (s *localStore) claim(_ context.Context, name string, body []byte) ([]byte, error) {
	final := filepath.Join(s.root, filepath.FromSlash(name))
	dir := filepath.Dir(final)
	created, err := s.mkdirAll(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: claim %q: %w", s, name, err)
	}
	// The claim's bytes are durable before its name appears, so a claim
	// is never seen empty.
	f, err := s.createTemp(dir, claimTempTag)
	if err != nil {
		return nil, fmt.Errorf("%s: claim %q: %w", s, name, err)
	}
	defer s.fs.Remove(f.Name())
	_, err = f.Write(body)
	if err == nil {
		s.step("fsync", f.Name())
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("%s: claim %q: %w", s, name, err)
	}
	s.step("claim", final)
	if err := s.fs.Link(f.Name(), final); errors.Is(err, fs.ErrExist) {
		existing, rerr := s.fs.ReadFile(final)
		if rerr != nil {
			return nil, fmt.Errorf("%s: claim %q: %w", s, name, rerr)
		}
		return existing, nil
	} else if errors.Is(err, fs.ErrNotExist) {
		// The claim's own temporary file is gone: only the Open of
		// another writer of the partition removes it (cleanTemps), so this
		// writer lost the partition.
		return nil, fmt.Errorf("%s: claim %q: its temporary file was removed by another writer's Open: %w", s, name, errGone)
	} else if err != nil {
		return nil, fmt.Errorf("%s: claim %q: %w", s, name, err)
	}
	return nil, s.syncDirs(dir, created)
}

func (s *localStore) read(_ context.Context, name string) ([]byte, error) {
	b, err := s.fs.ReadFile(filepath.Join(s.root, filepath.FromSlash(name)))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s, err)
	}
	return b, nil
}

func (p *localPending) abort() error {
	if p.committed {
		return nil
	}
	if p.f != nil {
		_ = p.f.Close()
		p.f = nil
	}
	if err := p.store.fs.Remove(p.name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s: remove temporary file: %w", p.store, err)
	}
	return nil
}
