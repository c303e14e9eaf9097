package cli

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"strings"

	"github.com/ehsink/ehsink/internal/buildinfo"
	"github.com/ehsink/ehsink/sinks"
)

const versionUsage = `Usage: ehsink version

Prints the version of ehsink, the commit it was built from, the Go
version that built it and the sink types the binary has (those its sink
packages registered).
`

// runVersion is `ehsink version`.
func (o Options) runVersion(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("version", versionUsage)
	if code, ok := fs.parse(args, stdout, stderr); !ok {
		return code
	}
	v := buildVersion(o.Version, o.Commit)
	fmt.Fprintf(stdout, "ehsink %s\ncommit %s\n%s %s/%s\n", v.version, v.commit, v.goVersion, runtime.GOOS, runtime.GOARCH)
	var registered *sinks.Registry // nil: what the sink packages registered
	fmt.Fprintf(stdout, "sinks %s\n", strings.Join(registered.Names(), ", "))
	return exitOK
}

type versionInfo struct {
	version, commit, goVersion string
}

// buildVersion fills in what the binary's main did not set (a custom
// binary's Options may leave Version and Commit empty) from the build's
// identity, which the sinks also write into their output (Parquet's
// created_by): the values `make build` stamps, or else those Go recorded.
func buildVersion(version, commit string) versionInfo {
	b := buildinfo.Get()
	v := versionInfo{version: version, commit: commit, goVersion: runtime.Version()}
	if v.version == "" {
		v.version = b.Version
	}
	if v.commit == "" {
		v.commit = b.Commit
	}
	return v
}
