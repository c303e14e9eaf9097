package parquet

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"sync"
)

// crashFS is the real file system with a memory of what is durable, after
// Pebble's strict in-memory file system: Crash puts every file it knows
// back to its bytes at its last fsync (empty when never fsynced) and every
// folder it knows back to its entries at its last fsync (a file created or
// linked since is gone, one removed since is back). Folders themselves
// survive a crash. It refuses to open an existing file for writing: the
// store never replaces a name, and a store that would (a publish by plain
// copy) fails.
type crashFS struct {
	osFS
	mu sync.Mutex // guards the 2 following fields
	// nodes are the current files of the folders it knows, by path. Two
	// paths share a node when linked.
	nodes map[string]*crashNode
	// durable are the entries of each known folder at its last fsync (or
	// when first touched).
	durable map[string]map[string]*crashNode
}

// crashNode is a file's bytes at its last fsync.
type crashNode struct{ synced []byte }

// errOverwrite is a write to an existing name.
var errOverwrite = errors.New("crashFS refuses to replace an existing file")

func newCrashFS() *crashFS {
	return &crashFS{nodes: map[string]*crashNode{}, durable: map[string]map[string]*crashNode{}}
}

// know records dir's files as durable before its first change. c.mu is held.
func (c *crashFS) know(dir string) error {
	if _, ok := c.durable[dir]; ok {
		return nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	c.durable[dir] = map[string]*crashNode{}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		p := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		n := &crashNode{synced: b}
		c.nodes[p] = n
		c.durable[dir][e.Name()] = n
	}
	return nil
}

func (c *crashFS) OpenFile(name string, flag int, perm fs.FileMode) (localFile, error) {
	if flag&(os.O_WRONLY|os.O_RDWR) == 0 {
		return c.osFS.OpenFile(name, flag, perm)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.know(filepath.Dir(name)); err != nil {
		return nil, err
	}
	if _, err := os.Lstat(name); err == nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: errOverwrite}
	}
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	n := &crashNode{}
	c.nodes[name] = n
	return &crashFile{File: f, fs: c, node: n}, nil
}

// crashFile is a file open for writing; Sync records its bytes as durable.
type crashFile struct {
	*os.File
	fs   *crashFS
	node *crashNode
}

func (f *crashFile) Sync() error {
	if err := f.File.Sync(); err != nil {
		return err
	}
	fi, err := f.File.Stat()
	if err != nil {
		return err
	}
	b := make([]byte, fi.Size())
	if _, err := f.File.ReadAt(b, 0); err != nil {
		return fmt.Errorf("crashFS: read back %s: %w", f.Name(), err)
	}
	f.fs.mu.Lock()
	f.node.synced = b
	f.fs.mu.Unlock()
	return nil
}

func (c *crashFS) Link(oldname, newname string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.know(filepath.Dir(oldname)); err != nil {
		return err
	}
	if err := c.know(filepath.Dir(newname)); err != nil {
		return err
	}
	if err := os.Link(oldname, newname); err != nil {
		return err
	}
	c.nodes[newname] = c.nodes[oldname]
	return nil
}

func (c *crashFS) Remove(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.know(filepath.Dir(name)); err != nil {
		return err
	}
	if err := os.Remove(name); err != nil {
		return err
	}
	delete(c.nodes, name)
	return nil
}

func (c *crashFS) SyncDir(dir string) error {
	if err := c.osFS.SyncDir(dir); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.know(dir); err != nil {
		return err
	}
	entries := map[string]*crashNode{}
	for p, n := range c.nodes {
		if filepath.Dir(p) == dir {
			entries[filepath.Base(p)] = n
		}
	}
	c.durable[dir] = entries
	return nil
}

// Crash puts the folders and files it knows back to their durable state.
// Files still open stay open on the bytes they had; a crashed writer is
// not used again.
func (c *crashFS) Crash() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for p := range maps.Clone(c.nodes) {
		if _, ok := c.durable[filepath.Dir(p)][filepath.Base(p)]; !ok {
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			delete(c.nodes, p)
		}
	}
	for dir, entries := range c.durable {
		for name, n := range entries {
			p := filepath.Join(dir, name)
			// A new file, not through a link another name shares.
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			if err := os.WriteFile(p, n.synced, 0o644); err != nil {
				return err
			}
			c.nodes[p] = n
		}
	}
	return nil
}
