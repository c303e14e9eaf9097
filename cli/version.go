package cli

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
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
func (o Options) runVersion(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet(ctx, "version", versionUsage)
	if code, ok := fs.parse(args, stdout, stderr); !ok {
		return code
	}
	v := buildVersion(o.Version, o.Commit)
	fmt.Fprintf(stdout, "%s %s\ncommit %s\n", o.program(), v.version, v.commit)
	if v.ehsink != "" {
		fmt.Fprintf(stdout, "ehsink %s\n", v.ehsink) // the module a custom binary builds on
	}
	fmt.Fprintf(stdout, "%s %s/%s\n", v.goVersion, runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(stdout, "sinks %s\n", strings.Join(registeredSinks(), ", "))
	return exitOK
}

// registeredSinks lists the sink types the binary's sink packages
// registered.
func registeredSinks() []string {
	var registered *sinks.Registry // nil: the global registry
	return registered.Names()
}

// ehsinkModule is the module path of ehsink, which a custom binary's
// module requires.
const ehsinkModule = "github.com/ehsink/ehsink"

type versionInfo struct {
	version, commit, goVersion string
	// ehsink is the version of module github.com/ehsink/ehsink when the
	// binary is another module's (a custom binary), else empty.
	ehsink string
}

// buildVersion fills in what the binary's main did not set (a custom
// binary's Options may leave Version and Commit empty) from the build's
// identity, which the sinks also write into their output (Parquet's
// created_by): the values `make build` stamps, or else those Go recorded.
func buildVersion(version, commit string) versionInfo {
	b := buildinfo.Get()
	v := versionInfo{version: version, commit: commit, goVersion: runtime.Version()}
	if info, ok := debug.ReadBuildInfo(); ok {
		if info.GoVersion != "" {
			v.goVersion = info.GoVersion
		}
		for _, d := range info.Deps {
			if d.Path == ehsinkModule {
				v.ehsink = d.Version
				if d.Replace != nil {
					v.ehsink += " => " + d.Replace.Path // a local checkout
				}
			}
		}
	}
	if v.version == "" {
		v.version = b.Version
	}
	if v.commit == "" {
		v.commit = b.Commit
	}
	return v
}
