package parquet

import (
	"os"
	"path/filepath"
	"strings"
)

// Destination says where the sink writes, for the connector's start line:
// the directory or container and the path template of the files.
func (c *Config) Destination() string {
	where := "Parquet files in " + c.Dir
	if c.Blob != nil {
		where = "Parquet files in blob container " + c.Blob.Container
	}
	if c.Path != "" {
		where += " as " + c.Path
	}
	return where
}

// committedPath is where a committed file is, for its log line: its path
// in a local store (relative to the working directory when under it, as a
// user typed the dir), or its name in the container.
func committedPath(st store, name string) string {
	ls, ok := st.(*localStore)
	if !ok {
		return name
	}
	p := filepath.Join(ls.root, filepath.FromSlash(name))
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, p); err == nil && !strings.HasPrefix(rel, "..") {
			return rel
		}
	}
	return p
}
