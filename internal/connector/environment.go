package connector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/internal/netdial"
	"github.com/ehsink/ehsink/internal/produce"
	"github.com/ehsink/ehsink/internal/secret"
)

// DevEnv starts the in-process emulator of an `emulator:` block. It is an
// interface so that the runtime does not link the emulator: the ehsink
// binary passes devenv.New(); a binary without it cannot run a config with
// an `emulator:` block.
type DevEnv interface {
	// StartEmulator starts an emulator serving spec's hubs (spec has its
	// defaults filled in) until Shutdown.
	StartEmulator(ctx context.Context, spec EmulatorSpec, log *slog.Logger) (Emulator, error)
}

// Emulator is a running in-process emulator.
type Emulator interface {
	// Addr is the address it listens on.
	Addr() string
	// ConnectionString is the connection string of one of its hubs.
	ConnectionString(hub string) string
	// Shutdown stops it and waits for its connections to close.
	Shutdown(ctx context.Context) error
}

// ErrNoDevEnv is returned by Run for a config with an `emulator:` block when
// RunOptions.DevEnv is nil.
var ErrNoDevEnv = errors.New("the in-process emulator needs a binary built with the development environment (github.com/ehsink/ehsink/cli/devenv: cli.Options{DevEnv: devenv.New()}); or run `ehsink emulator` and connect with its connection string")

// environment holds what Run starts besides the connectors: the in-process
// emulator and its demo producer. close stops them in reverse order and
// waits for them.
type environment struct {
	emu    Emulator
	wg     sync.WaitGroup
	stop   []func()
	mu     sync.Mutex // guards failed
	failed error
}

func startEnvironment(ctx context.Context, cfg *Config, dev DevEnv, log *slog.Logger) (*environment, error) {
	env := &environment{}
	spec := cfg.Emulator
	if spec == nil {
		return env, nil
	}
	if dev == nil {
		return nil, fmt.Errorf("emulator: %w", ErrNoDevEnv)
	}
	hubs := spec.Hubs
	names := slices.Sorted(maps.Keys(hubs))
	emu, err := dev.StartEmulator(ctx, *spec, log.With("component", "emulator"))
	if err != nil {
		return nil, fmt.Errorf("emulator: %w", err)
	}
	env.emu = emu
	env.stop = append(env.stop, func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := emu.Shutdown(sctx); err != nil {
			log.Warn("emulator shutdown", "error", err)
		}
	})
	// The connection string lets other tools (ehsink send, an SDK) reach
	// the emulator while this process runs; the key is the emulator's fixed
	// development key, not a secret.
	started := []any{"addr", emu.Addr(), "hubs", names}
	if len(names) > 0 {
		started = append(started, "connection", emu.ConnectionString(names[0]))
	}
	if r, ok := emu.(registryEmulator); ok && r.SchemaRegistryAddr() != "" {
		started = append(started, "schema_registry", "https://"+r.SchemaRegistryAddr())
	}
	log.Info("built-in Event Hubs emulator started", started...)

	if spec.Demo != nil {
		hub := spec.Demo.EventHub
		if _, ok := hubs[hub]; !ok {
			env.close()
			return nil, fmt.Errorf("emulator.demo.eventhub: no hub %q in emulator.hubs", hub)
		}
		if err := env.startDemo(ctx, hub, *spec.Demo, log.With("component", "demo-producer")); err != nil {
			env.close()
			return nil, err
		}
		log.Info("demo producer started", demoAttrs(hub, *spec.Demo)...)
	}
	return env, nil
}

// demoAttrs describe the demo producer for its start line.
func demoAttrs(hub string, d DemoSpec) []any {
	rate, count := "as fast as the hub takes them", "until stopped"
	if d.Rate > 0 {
		rate = strconv.FormatFloat(d.Rate, 'f', -1, 64) + "/s"
	}
	if d.Count > 0 {
		count = strconv.Itoa(d.Count)
	}
	return []any{"eventhub", hub, "sends", "JSON orders keyed by customer", "rate", rate, "customers", d.Keys, "count", count}
}

// startDemo runs the demo producer until ctx is done or its count is sent.
func (env *environment) startDemo(ctx context.Context, hub string, spec DemoSpec, log *slog.Logger) error {
	conn := env.emu.ConnectionString(hub)
	e, err := netdial.EventHubsConnectionString(conn)
	if err != nil {
		return fmt.Errorf("emulator.demo: %w", err)
	}
	// Dialed like the source's connections (keepalive, user timeout).
	var po azeventhubs.ProducerClientOptions
	netdial.SetProducerDial(&po, e)
	producer, err := azeventhubs.NewProducerClientFromConnectionString(conn, "", &po)
	if err != nil {
		return fmt.Errorf("emulator.demo: %w", err)
	}
	dctx, cancel := context.WithCancel(ctx)
	env.wg.Add(1)
	go func() {
		defer env.wg.Done()
		n, err := produce.Demo(dctx, producer, produce.DemoOptions{Count: spec.Count, Rate: spec.Rate, Keys: spec.Keys, Logger: log})
		if err != nil && dctx.Err() == nil {
			env.fail(fmt.Errorf("emulator.demo: after %d events: %w", n, err))
		}
	}()
	// The producer stops before the emulator does: stop runs in reverse.
	env.stop = append(env.stop, func() {
		cancel()
		env.wg.Wait()
		_ = producer.Close(context.WithoutCancel(ctx))
	})
	return nil
}

// emulatorConnection returns the connection string of the in-process
// emulator for hub, or an error when the config starts none.
func (env *environment) emulatorConnection(hub string) (secret.String, error) {
	if env.emu == nil {
		return "", errors.New(`"emulator" needs an emulator: block in the config`)
	}
	return secret.String(env.emu.ConnectionString(hub)), nil
}

func (env *environment) fail(err error) {
	env.mu.Lock()
	defer env.mu.Unlock()
	if env.failed == nil {
		env.failed = err
	}
}

func (env *environment) close() {
	for i := len(env.stop) - 1; i >= 0; i-- {
		env.stop[i]()
	}
	env.stop = nil
}

func (env *environment) err() error {
	env.mu.Lock()
	defer env.mu.Unlock()
	return env.failed
}
