// Command ehsink-jsonfiles runs the connectors of a connectors.yaml with the
// example jsonfiles sink available beside the built-in sinks: the shape of
// a user's own ehsink binary.
//
//	ehsink-jsonfiles -c connectors.yaml
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/ehsink/ehsink/connector"
	_ "github.com/ehsink/ehsink/examples/jsonfiles" // registers "jsonfiles"
	_ "github.com/ehsink/ehsink/sinks/stdout"
)

func main() {
	path := flag.String("c", "connectors.yaml", "the config file")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))

	cfg, err := connector.Load(*path, connector.LoadOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := connector.Run(ctx, cfg, connector.RunOptions{Logger: log}); err != nil && !errors.Is(err, context.Canceled) {
		log.Error("stopped", "error", err)
		os.Exit(1)
	}
}
