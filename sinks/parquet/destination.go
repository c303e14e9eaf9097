package parquet

import (
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Destination says where the sink writes, for the connector's start line:
// the directory (or container) and the folders of the path template; the
// file names are on each "parquet file committed" line.
func (c *sinkConfig) Destination() string {
	folders := ""
	if d := path.Dir(c.Path); c.Path != "" && d != "." {
		folders = "/" + d
	}
	if c.Blob != nil {
		return "Parquet files in blob container " + c.Blob.Container + folders
	}
	return "Parquet files in " + filepath.ToSlash(filepath.Clean(c.Dir)) + folders
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
