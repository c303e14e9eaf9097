package connector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/emulator"
	"github.com/ehsink/ehsink/produce"
	"github.com/ehsink/ehsink/secret"
)

// environment holds what Run starts besides the connectors: the in-process
// emulator and its demo producer. close stops them in reverse order and
// waits for them.
type environment struct {
	emu    *emulator.Server
	wg     sync.WaitGroup
	stop   []func()
	mu     sync.Mutex // guards failed
	failed error
}

func startEnvironment(ctx context.Context, cfg *Config, log *slog.Logger) (*environment, error) {
	env := &environment{}
	spec := cfg.Emulator
	if spec == nil {
		return env, nil
	}
	hubs := spec.Hubs
	names := make([]string, 0, len(hubs))
	for name := range hubs {
		names = append(names, name)
	}
	slices.Sort(names)
	ecfg := emulator.Config{Addr: spec.Listen, DataDir: spec.DataDir, Logger: log.With("component", "emulator")}
	for _, name := range names {
		ecfg.Hubs = append(ecfg.Hubs, emulator.HubConfig{Name: name, Partitions: hubs[name], ConsumerGroups: spec.ConsumerGroups})
	}
	emu, err := emulator.Start(ctx, ecfg)
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
	log.Info("built-in Event Hubs emulator started", "addr", emu.Addr(), "hubs", names)

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
	}
	return env, nil
}

// startDemo runs the demo producer until ctx is done or its count is sent.
func (env *environment) startDemo(ctx context.Context, hub string, spec DemoSpec, log *slog.Logger) error {
	producer, err := azeventhubs.NewProducerClientFromConnectionString(env.emu.ConnectionString(hub), "", nil)
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
