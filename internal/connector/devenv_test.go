package connector

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/ehsink/ehsink/emulator"
)

// testDevEnv starts the in-process emulator as devenv does (devenv imports
// this package, so these tests cannot use it).
type testDevEnv struct{}

func (testDevEnv) StartEmulator(ctx context.Context, spec EmulatorSpec, log *slog.Logger) (Emulator, error) {
	cfg := emulator.Config{Addr: spec.Listen, DataDir: spec.DataDir, Logger: log}
	for _, name := range slices.Sorted(maps.Keys(spec.Hubs)) {
		cfg.Hubs = append(cfg.Hubs, emulator.HubConfig{Name: name, Partitions: spec.Hubs[name], ConsumerGroups: spec.ConsumerGroups})
	}
	srv, err := emulator.Start(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("starting the emulator: %w", err)
	}
	return srv, nil
}

// TestRunWithoutDevEnv: a config with an emulator: block fails with
// ErrNoDevEnv, naming the package to import, when Run has no DevEnv.
func TestRunWithoutDevEnv(t *testing.T) {
	cfg := &Config{
		Emulator:   &EmulatorSpec{Hubs: map[string]int{"orders": 1}},
		Connectors: []Spec{{Name: "a", Source: SourceSpec{Connection: EmulatorConnection, EventHub: "orders"}, Sink: SinkSpec{Type: "fake"}}},
	}
	err := Run(t.Context(), cfg, RunOptions{})
	if err == nil || !strings.Contains(err.Error(), "github.com/ehsink/ehsink/cli/devenv") {
		t.Fatalf("Run without DevEnv: %v, want ErrNoDevEnv", err)
	}
}
