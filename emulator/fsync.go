package emulator

import "github.com/ehsink/ehsink/emulator/internal/hub"

// FsyncPolicy says when stored events are forced to disk ([Config.DataDir]).
type FsyncPolicy = hub.FsyncPolicy

// The fsync policies. The zero value, FsyncInterval, syncs every second.
const (
	// FsyncInterval syncs every partition with new events once a second:
	// a crash loses at most that window.
	FsyncInterval = hub.FsyncInterval
	// FsyncAlways syncs before a sent event is accepted.
	FsyncAlways = hub.FsyncAlways
	// FsyncNever leaves syncing to the operating system.
	FsyncNever = hub.FsyncNever
)

// ParseFsyncPolicy parses "interval", "always" or "never" (for flags).
func ParseFsyncPolicy(s string) (FsyncPolicy, error) { return hub.ParseFsyncPolicy(s) }
