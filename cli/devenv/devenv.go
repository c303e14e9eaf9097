// Package devenv is ehsink's development environment: the in-process Event
// Hubs emulator that `emulator:` in connectors.yaml starts (and
// `connection: emulator` reaches), and the `ehsink emulator` command. The
// ehsink binary includes it by setting cli.Options.DevEnv to [New]; a custom
// binary that does not do so does not link the emulator, and `validate`
// and `run` reject a config with an `emulator:` block.
package devenv

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"

	"github.com/ehsink/ehsink/emulator"
	"github.com/ehsink/ehsink/internal/connector"
)

// Exit codes, as every ehsink command uses them.
const (
	exitOK      = 0 // done, or stopped cleanly by a signal
	exitFailure = 1 // a runtime failure
	exitUsage   = 2 // bad flags
)

// Env is the development environment. Its zero value is ready to use.
type Env struct{}

// New returns the development environment, for cli.Options.DevEnv and
// connector.RunOptions.DevEnv.
func New() Env { return Env{} }

// StartEmulator starts the in-process emulator an `emulator:` block
// declares (with its defaults filled in), every hub with the block's
// consumer groups. It implements [connector.DevEnv].
func (Env) StartEmulator(ctx context.Context, spec connector.EmulatorSpec, log *slog.Logger) (connector.Emulator, error) {
	cfg := emulator.Config{Addr: spec.Listen, DataDir: spec.DataDir, SchemaRegistryAddr: spec.SchemaRegistry, Logger: log}
	for _, name := range slices.Sorted(maps.Keys(spec.Hubs)) {
		cfg.Hubs = append(cfg.Hubs, emulator.HubConfig{Name: name, Partitions: spec.Hubs[name], ConsumerGroups: spec.ConsumerGroups})
	}
	srv, err := emulator.Start(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("starting the emulator: %w", err)
	}
	return srv, nil
}

// EmulatorCommand runs `ehsink emulator` with args (those after the
// command's name) until ctx is cancelled, and returns its exit status.
func (Env) EmulatorCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runEmulator(ctx, args, stdout, stderr)
}
