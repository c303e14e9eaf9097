// Command ehsink-jsonfiles is ehsink with the example jsonfiles sink beside
// the stdout sink: the shape of a user's own ehsink binary. Every ehsink
// command works (run, validate, checkpoints, status, version, ...).
//
//	ehsink-jsonfiles run -c connectors.yaml
package main

import (
	"context"
	"os"

	"github.com/ehsink/ehsink/cli"
	_ "github.com/ehsink/ehsink/examples/jsonfiles" // registers "jsonfiles"
	_ "github.com/ehsink/ehsink/sinks/stdout"
)

// version is this binary's version; release builds set it with
// -ldflags "-X main.version=v1.2.3". version prints it beside the ehsink
// module it is built on.
var version = ""

func main() {
	os.Exit(cli.Main(context.Background(), os.Args[1:], cli.Options{Name: "ehsink-jsonfiles", Version: version}))
}
