package cli

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

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

// buildVersion fills in what the linker flags did not set from the build
// info: the module version ("(devel)" for a build in the checkout) and the
// VCS revision, marked "-dirty" when the work tree had changes.
func buildVersion(version, commit string) versionInfo {
	v := versionInfo{version: version, commit: commit, goVersion: runtime.Version()}
	if info, ok := debug.ReadBuildInfo(); ok {
		if v.version == "" {
			v.version = info.Main.Version
		}
		var rev, modified string
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
		if v.commit == "" && rev != "" {
			v.commit = rev
			if modified == "true" {
				v.commit += "-dirty"
			}
		}
		if info.GoVersion != "" {
			v.goVersion = info.GoVersion
		}
	}
	if v.version == "" {
		v.version = "(devel)"
	}
	if v.commit == "" {
		v.commit = "unknown"
	}
	return v
}
