package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestResolve(t *testing.T) {
	vcs := []debug.BuildSetting{{Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.modified", Value: "true"}}
	for _, tc := range []struct {
		name            string
		version, commit string
		info            *debug.BuildInfo
		want            Info
	}{
		{"stamped by the linker", "v1.2.3", "abc123", &debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "(devel)"}, Settings: vcs}, Info{"v1.2.3", "abc123"}},
		{"from the build info", "", "", &debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "v1.2.4"}, Settings: vcs}, Info{"v1.2.4", "0123abcd-dirty"}},
		// A custom binary: ehsink's version is the dependency's, and the
		// binary's own revision is not ehsink's commit.
		{"ehsink as a dependency", "", "", &debug.BuildInfo{Main: debug.Module{Path: "example.com/mine", Version: "v0.1.0"},
			Deps: []*debug.Module{{Path: modulePath, Version: "v1.3.0"}}, Settings: vcs}, Info{"v1.3.0", "unknown"}},
		{"nothing recorded", "", "", nil, Info{"(devel)", "unknown"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := resolve(tc.version, tc.commit, tc.info); got != tc.want {
				t.Fatalf("resolve = %+v, want %+v", got, tc.want)
			}
		})
	}
}
