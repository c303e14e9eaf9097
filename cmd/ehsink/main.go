// Command ehsink moves events from Azure Event Hubs into sinks (PostgreSQL, Iceberg,
// Parquet, stdout, custom ones) as declared in connectors.yaml.
//
// Usage:
//
//	ehsink <command> [flags]
//
// Run `ehsink --help` for the commands and `ehsink <command> --help` for
// their flags. The commands live in package cli; this binary adds the
// built-in sinks and the development environment (the in-process emulator
// of an `emulator:` block, and the `emulator` command). Exit status: 0 ok, 1 runtime failure, 2 usage or config
// error.
package main

import (
	"context"
	"os"

	"github.com/ehsink/ehsink/cli"
	"github.com/ehsink/ehsink/cli/devenv"
	_ "github.com/ehsink/ehsink/sinks/delta"
	_ "github.com/ehsink/ehsink/sinks/iceberg"
	_ "github.com/ehsink/ehsink/sinks/parquet"
	_ "github.com/ehsink/ehsink/sinks/postgres"
	_ "github.com/ehsink/ehsink/sinks/stdout"
)

// version and commit are set at link time
// (-ldflags "-X main.version=v1.2.3 -X main.commit=abc123"); when empty,
// they come from the build info Go records.
var (
	version string
	commit  string
)

func main() {
	os.Exit(cli.Main(context.Background(), os.Args[1:], cli.Options{Version: version, Commit: commit, DevEnv: devenv.New()}))
}
