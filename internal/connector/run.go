package connector

import (
	"context"
	"errors"
	"fmt"
	"github.com/ehsink/ehsink/internal/backoff"
	"github.com/ehsink/ehsink/internal/connstr"
	"github.com/ehsink/ehsink/internal/secret"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
	hamba "github.com/hamba/avro/v2"

	"github.com/ehsink/ehsink/checkpoint"
	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/source"
)

// RunOptions select and instrument the connectors Run starts.
type RunOptions struct {
	// Connectors names the connectors to run. If empty, all of them.
	Connectors []string
	// Registry resolves sink types. If nil, the drivers registered with
	// [sinks.Register] (see [sinks.Registry]).
	Registry *sinks.Registry
	// Logger receives the logs of every connector. If nil, logs are discarded.
	Logger *slog.Logger
	// Metrics records the runners' metrics. If nil, none.
	Metrics *Metrics
	// Control, when set, receives the connectors Run runs, to show their
	// status and pause, resume or restart them while Run runs.
	Control *Control
	// DevEnv starts the in-process emulator of an `emulator:` block. If
	// nil, such a config fails with [ErrNoDevEnv].
	DevEnv DevEnv
}

// Run runs the selected connectors of cfg until ctx is cancelled, then
// drains them (batches in flight are flushed and checkpointed within
// cfg.DrainTimeout) and returns nil.
//
// Connectors are isolated: one that fails (a permanent sink or source
// error: config, credentials, a table that does not match) is logged at
// ERROR once and stops alone; the others keep running. A sink that is
// unreachable at start is waited for with the connector's retry backoff,
// holding no partition meanwhile. Run returns when ctx is cancelled or
// when every connector has stopped, with the failures joined (each names
// its connector), or nil when none failed.
func Run(ctx context.Context, cfg *Config, opts RunOptions) error {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	reg := opts.Registry     // nil: the drivers sinks.Register added
	cfg = cfg.withDefaults() // a config built by hand gets what Load would give it
	specs, err := selectConnectors(cfg, opts.Connectors)
	if err != nil {
		return err
	}

	env, err := startEnvironment(ctx, cfg, opts.DevEnv, log)
	if err != nil {
		return err
	}
	defer env.close()

	control := opts.Control
	if control == nil {
		control = NewControl()
	}
	var wg sync.WaitGroup
	errs := make([]error, len(specs))
	for i, spec := range specs {
		cs := control.add(spec.Name, opts.Metrics)
		wg.Add(1)
		go func() {
			defer wg.Done()
			clog := log.With("connector", spec.Name)
			err := cs.run(ctx, clog, func(ctx context.Context) error {
				return runConnector(ctx, cfg, spec, env, reg, opts.Metrics, cs, clog)
			})
			if err != nil {
				errs[i] = err
				cs.failed(err)
				clog.Error("connector failed; the other connectors keep running", "err", err)
				return
			}
			cs.set(StateStopped)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return env.err()
}

func selectConnectors(cfg *Config, names []string) ([]Spec, error) {
	if len(names) == 0 {
		return cfg.Connectors, nil
	}
	var out []Spec
	for _, n := range names {
		i := slices.IndexFunc(cfg.Connectors, func(s Spec) bool { return s.Name == n })
		if i < 0 {
			known := make([]string, len(cfg.Connectors))
			for j, s := range cfg.Connectors {
				known[j] = s.Name
			}
			return nil, fmt.Errorf("no connector named %q (the config has %v)", n, known)
		}
		out = append(out, cfg.Connectors[i])
	}
	return out, nil
}

// runConnector builds the sink, checkpoint store and source of one
// connector and runs a partition runner for every partition it owns.
func runConnector(ctx context.Context, cfg *Config, spec Spec, env *environment, reg *sinks.Registry, met *Metrics, cs *connState, log *slog.Logger) error {
	fail := func(what string, err error) error {
		if ctx.Err() != nil {
			// Stopped while starting (a signal, or another connector's
			// failure, which Run reports): not a failure of this one.
			return nil
		}
		return fmt.Errorf("connector %q: %s: %w", spec.Name, what, err)
	}
	conn, info, actualNamespace, err := resolveSource(spec, env, log)
	if err != nil {
		return fail("source.connection", err)
	}

	driver, err := reg.Lookup(spec.Sink.Type)
	if err != nil {
		return fail("sink.type", err)
	}
	sinkCfg := spec.Sink.Config
	if sinkCfg == nil {
		sinkCfg = driver.NewConfig()
	}
	// With columns: auto the registry is asked before the sink is built:
	// the columns it derives are the sink's.
	decoder, err := newDecoder(spec, conn, env)
	if err != nil {
		return fail("source.registry", err)
	}
	var (
		auto     *autoState
		autoCols []string
	)
	if spec.Sink.Auto != nil && decoder != nil {
		d, err := startWithRetry(ctx, "schema registry", spec.Errors.Retry, func(err error) bool { return !errors.Is(err, errAutoColumns) }, func(error) {}, log,
			func() (derived, error) { return deriveAtStart(ctx, spec, decoder, cs.autoExtra()) })
		if err != nil {
			return fail("sink.columns", err)
		}
		sinkCfg, autoCols = d.cfg, d.cols.Names()
		log.Info("columns derived from the Avro schema (columns: auto)", "columns", strings.Join(d.cols.Names(), ","))
		if spec.Source.Registry.ReaderSchema == "" {
			// With a reader schema every event resolves into it: a newer
			// writer's field never reaches the mapping.
			auto = newAutoState(spec, d.cols, func(w hamba.Schema) {
				log.Info("an event's writer schema adds a field; restarting to add its column before writing it")
				cs.addAutoExtra(w)
				cs.requestRestart()
			})
		}
	}
	cs.describe(info.EventHub, info.ConsumerGroup, spec.Sink.Type)
	sink, err := newSink(ctx, driver, sinkCfg, info, spec.Errors.Retry, cs.sinkUnavailable, log)
	cs.sinkReached(err)
	if err != nil {
		return fail("sink", err)
	}
	if autoCols != nil {
		// test/e2e's kill between a column's DDL and its first row
		killAfterGrowth(spec.Name, autoCols, log)
	}
	defer func() {
		if err := sink.Close(context.WithoutCancel(ctx)); err != nil {
			log.Error("closing sink", "error", err)
		}
	}()

	store, err := openStore(ctx, spec, actualNamespace, info.Namespace, met.blobRequests(spec.Name), log)
	if err != nil {
		return fail("checkpoint", err)
	}

	dead, err := NewFileDeadLetters(spec.Errors.DeadLetter.Dir)
	if err != nil {
		return fail("errors.dead_letter", err)
	}

	ropts := runnerOptions(cfg, spec, sink, sinkCfg, dead, met, cs, log)
	ropts.Decoder, ropts.auto = decoder, auto
	runner, err := NewRunner(ropts)
	if err != nil {
		return fail("runner", err)
	}
	srcOpts, err := sourceOptions(spec, conn, store, runner, sink, cs.sourceDownSince, met, log)
	if err != nil {
		return fail("source.credential", err)
	}
	src, err := newSource(ctx, srcOpts, spec.Errors.Retry, cs.sourceReached, log)
	cs.sourceReached(err)
	if err != nil {
		return fail("source", err)
	}
	defer src.Close(context.WithoutCancel(ctx))
	lb := spec.Source.LoadBalancing
	runner.brk.peers = newPeers(store, src.Namespace(), src.EventHub(), src.ConsumerGroup(), src.OwnerID(), lb.OwnershipExpiration, lb.UpdateInterval, log)

	cs.started(runner, src.OwnerID())
	defer cs.setRunner(nil)
	letters := LetterStore(sink, &spec)
	replayer := LetterReplayer(&spec, letters, decoder)
	cs.setReplayer(&replayer)
	defer cs.setReplayer(nil)
	var props sync.WaitGroup
	pctx, stopProps := context.WithCancel(ctx)
	props.Go(func() { cs.refreshProps(pctx, src, runner, cfg.lagInterval()) })
	props.Go(func() { cs.countLetters(pctx, letters, cfg.lagInterval()) })
	props.Go(func() {
		every := spec.Source.Settings.WithDefaults().LoadBalancing.UpdateInterval
		probeIdle(pctx, every, runner.brk, runner, func(ctx context.Context) (sinks.Sink, error) {
			return driver.New(ctx, sinkCfg, info)
		})
	})
	defer props.Wait()
	defer stopProps()

	log.Info("connector started", startedAttrs(info, spec, sinkCfg, src.OwnerID())...)
	err = src.Run(ctx, func(ctx context.Context, p *source.Partition) error {
		return giveUp(runner.RunPartition(ctx, partitionAdapter{p}))
	})
	if err != nil {
		return fmt.Errorf("connector %q: %w", spec.Name, err)
	}
	log.Info("connector stopped")
	return nil
}

// resolveSource works out which Event Hubs namespace and hub the connector
// reads, before anything is dialled, so the sink and the checkpoint store
// are told the same names. It returns the connection to dial (the
// emulator's, when the spec says "emulator"), the sink's Info, and the
// namespace actually dialled, which differs from info.Namespace only for
// the emulator: checkpoints are kept under [EmulatorNamespace] so they
// survive the emulator's port changing. Every error is the
// source.connection setting's.
func resolveSource(spec Spec, env *environment, log *slog.Logger) (conn secret.String, info sinks.Info, actualNamespace string, err error) {
	conn = spec.Source.Connection
	viaEmulator := conn.Reveal() == "emulator"
	if viaEmulator {
		if conn, err = env.emulatorConnection(spec.Source.EventHub); err != nil {
			return conn, info, "", err
		}
	}
	info = sinks.Info{Connector: spec.Name, EventHub: spec.Source.EventHub, ConsumerGroup: spec.Source.ConsumerGroup, Logger: log}
	if conn != "" {
		props, err := connstr.EventHubs(conn.Reveal())
		if err != nil {
			return conn, info, "", err
		}
		info.Namespace = props.FullyQualifiedNamespace
		if info.EventHub == "" && props.EntityPath != nil {
			info.EventHub = *props.EntityPath
		}
	} else {
		info.Namespace = spec.Source.Namespace
	}
	actualNamespace = info.Namespace
	if viaEmulator {
		info.Namespace = EmulatorNamespace
	}
	return conn, info, actualNamespace, nil
}

// SinkInfo is the Info the runner gives spec's sink (the namespace and
// event hub worked out as resolveSource does, the connection string's
// EntityPath included), for a command that builds the sink without
// running the connector (ehsink deadletters): the sink then reads and
// keys what the running connector's sink does.
func SinkInfo(spec Spec, log *slog.Logger) (sinks.Info, error) {
	if spec.Source.Connection.Reveal() == EmulatorConnection {
		return sinks.Info{Connector: spec.Name, Namespace: EmulatorNamespace, EventHub: spec.Source.EventHub, ConsumerGroup: spec.Source.ConsumerGroup, Logger: log}, nil
	}
	_, info, _, err := resolveSource(spec, nil, log)
	return info, err
}

// openStore opens the connector's checkpoint store, retrying while it
// cannot be reached, and keeps checkpoints under the namespace the sink is
// told (alias) when the namespace dialled (actual) differs, as it does for
// the emulator.
func openStore(ctx context.Context, spec Spec, actual, alias string, onRequest func(op string), log *slog.Logger) (azeventhubs.CheckpointStore, error) {
	store, err := startWithRetry(ctx, "checkpoint store", spec.Errors.Retry, storeTransient, func(error) {}, log, func() (azeventhubs.CheckpointStore, error) {
		return NewCheckpointStore(ctx, spec.Checkpoint, log, onRequest)
	})
	if err != nil {
		return nil, err
	}
	return checkpoint.AliasNamespace(store, actual, alias), nil
}

// runnerOptions maps one connector's spec onto the partition runner's
// options, so the mapping from YAML settings to runner knobs is read in
// one place and runConnector reads as its steps.
func runnerOptions(cfg *Config, spec Spec, sink sinks.Sink, sinkCfg any, dead *FileDeadLetters, met *Metrics, cs *connState, log *slog.Logger) RunnerOptions {
	return RunnerOptions{
		Connector:               spec.Name,
		Sink:                    sink,
		Tolerance:               spec.Errors.Tolerance,
		Filter:                  spec.Filter,
		Format:                  ChangeEvents(sinkCfg),
		DeadLetters:             dead,
		Revision:                spec.Revision(),
		Retry:                   spec.Errors.Retry,
		CircuitBreaker:          spec.Errors.CircuitBreaker,
		GiveUpAfter:             spec.Source.LoadBalancing.OwnershipExpiration,
		CheckpointEveryEvents:   spec.Checkpoint.EveryEvents,
		CheckpointEveryInterval: spec.Checkpoint.EveryInterval,
		DrainTimeout:            cfg.DrainTimeout,
		SinkTimeout:             spec.Errors.SinkTimeout,
		Logger:                  log,
		Metrics:                 met,
		pause:                   cs.gate,
		sinkCalled:              cs.sinkReached,
		sourceDown:              cs.sourceDownSince,
		storeCalled:             cs.storeReached,
		lettersStored:           cs.lettersChanged,
	}
}

// sourceOptions maps one connector's spec onto the source's options and
// wires the source to the runner: claims ask the sink for its position,
// and the circuit breaker holds claims while the sink is down. Without a
// connection string it builds the default Azure credential; its error is
// the only one returned.
func sourceOptions(spec Spec, conn secret.String, store azeventhubs.CheckpointStore, runner *Runner, sink sinks.Sink, sourceDown func() time.Time, met *Metrics, log *slog.Logger) (source.Options, error) {
	srcOpts := source.Options{Settings: spec.Source.Settings}
	srcOpts.Connection, srcOpts.Namespace, srcOpts.EventHub = conn, spec.Source.Namespace, spec.Source.EventHub
	srcOpts.Store = store
	srcOpts.Claim = claimWriter(runner, sink)
	// No claim while the sink's breaker holds them, nor while Event Hubs
	// is not reached: a partition claimed then could not be resumed, and
	// one this replica gave up (sourceGone) would come straight back.
	srcOpts.HoldClaims = func() bool { return runner.brk.holdingClaims() || !sourceDown().IsZero() }
	srcOpts.OnHeal = func(reason string) { met.healed(spec.Name, reason) }
	srcOpts.Logger = log
	if conn == "" {
		cred, err := azidentity.NewDefaultAzureCredential(nil)
		if err != nil {
			return srcOpts, err
		}
		srcOpts.Credential = cred
	}
	return srcOpts, nil
}

// startedAttrs are the attributes of the "connector started" line: what
// the connector reads, where it writes (when the sink's config can say)
// and which owner id this replica claims partitions under.
func startedAttrs(info sinks.Info, spec Spec, sinkCfg any, owner string) []any {
	started := []any{"eventhub", info.EventHub, "consumer_group", info.ConsumerGroup, "sink", spec.Sink.Type}
	if d, ok := sinkCfg.(interface{ Destination() string }); ok {
		started = append(started, "writes_to", d.Destination())
	}
	started = append(started, formatAttrs(spec.Source)...)
	return append(started, "owner", owner)
}

// newSink builds the connector's sink. A sink that fails with a transient
// error (the server is unreachable, starting, throttling) is retried with
// the connector's backoff, like an outage mid-run, until ctx ends or
// retry.MaxAttempts is used; the connector claims no partition meanwhile,
// so replicas whose sink is reachable serve them. Any other error is the
// connector's failure.
func newSink(ctx context.Context, driver sinks.Driver, cfg any, info sinks.Info, retry RetrySpec, unavailable func(error), log *slog.Logger) (sinks.Sink, error) {
	return startWithRetry(ctx, "sink", retry, sinks.IsTransient, unavailable, log, func() (sinks.Sink, error) {
		return driver.New(ctx, cfg, info)
	})
}

// newSource connects the connector's source. A namespace that cannot be
// reached (down, restarting, a network blip) is waited for like a sink
// outage; a hub, consumer group or credential the service refuses is the
// connector's failure at once.
func newSource(ctx context.Context, opts source.Options, retry RetrySpec, unavailable func(error), log *slog.Logger) (*source.Source, error) {
	transient := func(err error) bool {
		return !errors.Is(err, source.ErrNotFound) && !errors.Is(err, source.ErrUnauthorized)
	}
	return startWithRetry(ctx, "source", retry, transient, unavailable, log, func() (*source.Source, error) {
		return source.New(ctx, opts)
	})
}

// storeTransient reports whether a checkpoint store failed to open because
// it could not be reached (down, restarting, throttling): that is waited
// for like a sink outage. A refusal (credentials, a bad name) is not.
func storeTransient(err error) bool {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return re.StatusCode == http.StatusRequestTimeout || re.StatusCode == http.StatusTooManyRequests || re.StatusCode >= 500
	}
	var ne net.Error
	return errors.As(err, &ne)
}

// startWithRetry calls start until it succeeds, fails with an error
// transient does not accept, ctx ends, or retry.MaxAttempts is used,
// waiting a jittered, doubling backoff between attempts.
func startWithRetry[T any](ctx context.Context, what string, retry RetrySpec, transient func(error) bool, unavailable func(error), log *slog.Logger, start func() (T, error)) (T, error) {
	retry = retry.withDefaults()
	waits := backoff.Backoff{Initial: retry.InitialBackoff, Max: retry.MaxBackoff}
	for attempt := 1; ; attempt++ {
		v, err := start()
		if err == nil {
			if attempt > 1 {
				log.Info(what + " reachable; starting")
			}
			return v, nil
		}
		if !transient(err) || ctx.Err() != nil {
			return v, err
		}
		if retry.MaxAttempts > 0 && attempt >= retry.MaxAttempts {
			return v, fmt.Errorf("unreachable after %d attempts: %w", attempt, err)
		}
		unavailable(err)
		wait := waits.Jittered()
		log.Warn(what+" unavailable at start; holding no partition and retrying", "attempt", attempt, "wait", wait, "err", err)
		if !sleepOrChange(ctx, wait, nil, nil) {
			return v, ctx.Err()
		}
	}
}

// partitionAdapter translates the source's ownership-lost error into the
// runner's.
type partitionAdapter struct{ p *source.Partition }

func (a partitionAdapter) ID() string { return a.p.ID() }

func (a partitionAdapter) Receive(ctx context.Context) ([]sinks.Event, error) {
	return a.p.Receive(ctx)
}

// Heartbeat tells the source's watchdog that the partition is alive while
// the runner retries or holds back instead of receiving.
func (a partitionAdapter) Heartbeat() { a.p.Heartbeat() }

// TakeWriter returns the sink writer the claim opened (see claimWriter)
// and the watermark it reported, when there is one.
func (a partitionAdapter) TakeWriter() (sinks.Writer, *sinks.Position, bool) {
	v, wm, ok := a.p.TakeOpened()
	if !ok {
		return nil, nil, false
	}
	w, isWriter := v.(sinks.Writer)
	if !isWriter {
		return nil, nil, false
	}
	return w, wm, true
}

// LeaseExpiry is the source's: when the partition's lease runs out unless
// renewed.
func (a partitionAdapter) LeaseExpiry() (time.Time, bool) { return a.p.LeaseExpiry() }

// Seek is the source's: reading moves to just after pos, the lease kept.
func (a partitionAdapter) Seek(pos sinks.Position) error { return a.p.Seek(pos) }

// StoredCheckpoint is the source's: the checkpoint stored at the claim.
func (a partitionAdapter) StoredCheckpoint() (int64, bool) { return a.p.StoredCheckpoint() }

func (a partitionAdapter) Checkpoint(ctx context.Context, pos sinks.Position) error {
	return a.p.Checkpoint(ctx, pos)
}

// giveUp tells the source to give a partition's lease up when the runner
// stopped it for another replica to serve (givingUp).
func giveUp(err error) error {
	if givingUp(err) {
		return fmt.Errorf("%w: %w", source.ErrGiveUp, err)
	}
	return err
}

// claimWriter opens the sink's writer of a newly claimed partition for the
// source, which works out the resume position from the watermark the
// writer reports and hands the writer to the partition's RunPartition
// (partitionAdapter.TakeWriter): one Open per claim. A partition the
// runner still drives (its old handler draining while the new claim is
// made) answers with its committed watermark and opens nothing, as a
// second writer would disturb the first (a sink's Open cleans up what an
// earlier writer left behind); RunPartition then opens its own.
func claimWriter(r *Runner, sink sinks.Sink) func(context.Context, string) (*sinks.Position, source.Opened, error) {
	return func(ctx context.Context, partition string) (*sinks.Position, source.Opened, error) {
		if wm, ok := r.Watermark(partition); ok {
			return wm, nil, nil
		}
		var (
			w   sinks.Writer
			wm  *sinks.Position
			err error
		)
		err = r.callSink(ctx, callGuard{}, func(ctx context.Context) error {
			w, wm, err = sink.Open(ctx, partition)
			return err
		})
		switch {
		case err == nil, ctx.Err() == nil:
			r.brk.claimResult(err)
			r.sinkCalled(ctx, err)
		case errors.Is(err, errStillAnswering):
			// The claim's budget ran out while the sink answered (a
			// slow path needs more round trips than the budget allows
			// for a new session): the claim fails, and a replica
			// whose sink is nearer may take the partition, but the
			// sink is not down.
		case errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled):
			// The claim's budget (a third of the ownership expiration)
			// ran out before the sink answered: that is the sink's
			// failure, not a shutdown, whichever deadline came first.
			err = sinks.Transient(fmt.Errorf("%w: no answer within the claim's bound: %w", ErrSinkTimeout, err))
			r.brk.claimResult(err)
			if f := r.opts.sinkCalled; f != nil {
				f(err)
			}
		}
		if err != nil {
			return nil, nil, fmt.Errorf("opening the sink for partition %s: %w", partition, err)
		}
		return wm, w, nil
	}
}
