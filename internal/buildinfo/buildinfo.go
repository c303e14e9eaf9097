// Package buildinfo names the ehsink build a binary carries: its version
// and the commit it was built from. `make build` stamps both with the
// linker; a build without the stamps (go build, go install, a custom
// binary that imports ehsink) falls back on what Go records in the binary.
// The output the sinks write (Parquet's created_by) and `ehsink version`
// read the same values.
package buildinfo

import "runtime/debug"

// version and commit are set at link time by the Makefile:
// -X github.com/ehsink/ehsink/internal/buildinfo.version=v1.2.3
// -X github.com/ehsink/ehsink/internal/buildinfo.commit=abc123. They are
// never written at run time.
var (
	version string
	commit  string
)

// modulePath is ehsink's module, looked up in the build info when the
// linker stamped nothing.
const modulePath = "github.com/ehsink/ehsink"

// Info is a build's identity.
type Info struct {
	// Version is the release (git describe under make build), or the
	// module version Go recorded, or "(devel)".
	Version string
	// Commit is the VCS revision, "-dirty" when the work tree had changes,
	// or "unknown".
	Commit string
}

// Get returns the build's identity; see [Info] for the fallbacks.
func Get() Info {
	info, _ := debug.ReadBuildInfo()
	return resolve(version, commit, info)
}

// resolve fills in what the linker did not stamp from info (nil when Go
// recorded none). In a custom binary ehsink is a dependency, and its
// version there is the version of the code that wrote the output.
func resolve(version, commit string, info *debug.BuildInfo) Info {
	v := Info{Version: version, Commit: commit}
	if info != nil {
		if v.Version == "" {
			if info.Main.Path == modulePath {
				v.Version = info.Main.Version
			}
			for _, d := range info.Deps {
				if d.Path == modulePath {
					v.Version = d.Version
				}
			}
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
		if v.Commit == "" && rev != "" && info.Main.Path == modulePath {
			v.Commit = rev
			if modified == "true" {
				v.Commit += "-dirty"
			}
		}
	}
	if v.Version == "" {
		v.Version = "(devel)"
	}
	if v.Commit == "" {
		v.Commit = "unknown"
	}
	return v
}
