package source

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/ehsink/ehsink/internal/backoff"
	"github.com/ehsink/ehsink/internal/connstr"
	"github.com/ehsink/ehsink/internal/netdial"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
)

// probeTimeout bounds the consumer group probe of New: the attach is refused
// at once when the group is missing, so waiting longer proves nothing more.
// The probe reads the earliest event of a partition that holds one
// (heldPartition), so it ends at once unless the hub is empty.
const probeTimeout = 2 * time.Second

// closeTimeout bounds closing a partition client after its handler returned.
const closeTimeout = 10 * time.Second

// Source reads one event hub in one consumer group. Build it with [New],
// start it with [Source.Run], release it with [Source.Close]. Its methods
// are safe for concurrent use; Run may be called once.
type Source struct {
	opts     Options
	policy   policy
	client   *azeventhubs.ConsumerClient
	props    *propsClient // partition-properties calls, on a connection of their own
	readers  *readerPool  // connections partitions are received on; nil: the processor's
	prefetch int          // of each partition's link: Settings.PrefetchFor the partitions at New
	ns       string       // fully qualified namespace as the SDK sees it (host[:port])
	hub      string
	owner    string
	log      *slog.Logger
	started  atomic.Bool
	closed   atomic.Bool

	lastMu sync.Mutex       // guards last
	last   map[string]int64 // the last enqueued sequence number each partition-properties call read, by partition

	mu         sync.Mutex                         // guards the 15 following fields
	startAttrs map[string][]any                   // where each claimed partition starts, for its "partition claimed" line
	partitions []string                           // the hub's partition IDs, read by New and at every claim round
	listed     map[string]azeventhubs.Ownership   // the ownership listing of the last claim round, by partition
	claimed    map[string]azeventhubs.Ownership   // partitions this replica owned after the last ClaimOwnership, with their leases
	resolved   map[string]*azeventhubs.Checkpoint // resume positions worked out for claimed partitions not yet released (nil: start position)
	stored     map[string]int64                   // sequence number of the stored checkpoint of claimed partitions at the last listing (-1: none; absent: not known)
	unresolved map[string]error                   // claimed partitions whose resume position could not be worked out, and why
	running    map[string]*Partition              // partitions whose handler runs
	idleSince  map[string]time.Time               // claimed partitions without a running handler, since when
	idleRounds map[string]int                     // claim rounds of the processor each partition of idleSince was idle at
	progress   time.Time                          // the processor's last claim round or hand-out of a partition
	reported   map[string]bool                    // stalls already reported, until the partition runs again
	starts     map[string]azeventhubs.Checkpoint  // the checkpoints last handed to the processor (connections.go)
	opened     map[string]opened                  // what Options.Claim opened for claimed partitions, until a handler takes it
	renewed    map[string]time.Time               // when the last successful claim or renewal of each claimed partition was sent
	givenUp    map[string]time.Time               // partitions whose lease a handler gave up (ErrGiveUp), since when: neither renewed nor claimed here for an ownership expiration

	// test seams (export_test.go): fail the next n checkpoint listings, and
	// let the processor see the error (as before the store shielded it).
	injectListErrs atomic.Int64
	passListErrs   atomic.Bool
}

// New builds the clients and checks, within ctx, that the event hub and the
// consumer group exist and the credentials are accepted, so that a wrong
// setting fails at once with an error naming the hub and the cause
// ([ErrNotFound], [ErrUnauthorized], or the connection failure) rather than
// in a retry loop. It starts no goroutine.
func New(ctx context.Context, opts Options) (*Source, error) {
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("source: %w", err)
	}
	opts = opts.WithDefaults()
	policy, _ := parsePolicy(opts.OnInvalidCheckpoint)
	if opts.InstanceID == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		opts.InstanceID = "ehsink-" + hex.EncodeToString(b[:])
	}
	hub, ns, err := resolveHub(opts)
	if err != nil {
		return nil, err
	}
	s := &Source{opts: opts, policy: policy, hub: hub, ns: ns, owner: opts.InstanceID, log: opts.Logger.With("eventhub", hub, "owner", opts.InstanceID)}

	// The probe client does not retry: the checks below must answer in
	// seconds. The long-lived client keeps the SDK's retry policy.
	probe, err := s.newClient(&azeventhubs.ConsumerClientOptions{
		InstanceID:   opts.InstanceID + "-probe",
		RetryOptions: azeventhubs.RetryOptions{MaxRetries: -1},
	})
	if err != nil {
		return nil, err
	}
	defer func() { _ = probe.Close(context.WithoutCancel(ctx)) }()
	partitions, err := s.check(ctx, probe)
	if err != nil {
		return nil, err
	}
	s.prefetch = opts.PrefetchFor(partitions)
	if n := opts.ConnectionsFor(partitions); n > 1 {
		if s.readers, err = s.newReaders(ctx, n); err != nil {
			return nil, err
		}
	}
	s.client, err = s.newClient(&azeventhubs.ConsumerClientOptions{InstanceID: opts.InstanceID, RetryOptions: opts.clientRetry})
	if err != nil {
		if s.readers != nil {
			_ = s.readers.close(context.WithoutCancel(ctx))
		}
		return nil, err
	}
	s.props = &propsClient{dial: func() (*azeventhubs.ConsumerClient, error) {
		return s.newClient(&azeventhubs.ConsumerClientOptions{InstanceID: opts.InstanceID + "-props", RetryOptions: opts.clientRetry})
	}}
	return s, nil
}

// resolveHub returns the event hub name and the namespace of opts.
func resolveHub(opts Options) (hub, ns string, err error) {
	if opts.Connection == "" {
		return opts.EventHub, opts.Namespace, nil
	}
	// The SDK's parse errors name the missing key, never the value.
	props, err := connstr.EventHubs(opts.Connection.Reveal())
	if err != nil {
		return "", "", fmt.Errorf("source: connection string: %w", err)
	}
	hub = opts.EventHub
	if props.EntityPath != nil && *props.EntityPath != "" {
		if hub != "" && hub != *props.EntityPath {
			return "", "", fmt.Errorf("event hub %q: the connection string names event hub %q (EntityPath); remove one of them", hub, *props.EntityPath)
		}
		hub = *props.EntityPath
	}
	if hub == "" {
		return "", "", errors.New("event hub name is required: set eventhub or add EntityPath to the connection string")
	}
	return hub, props.FullyQualifiedNamespace, nil
}

func (s *Source) newClient(co *azeventhubs.ConsumerClientOptions) (*azeventhubs.ConsumerClient, error) {
	co.CustomEndpoint = s.opts.CustomEndpoint
	var (
		c   *azeventhubs.ConsumerClient
		err error
	)
	if s.opts.Connection != "" {
		hub := s.hub
		props, perr := connstr.EventHubs(s.opts.Connection.Reveal())
		if perr == nil && props.EntityPath != nil && *props.EntityPath != "" {
			hub = "" // the SDK refuses a hub name given twice
		}
		if perr == nil {
			s.setDial(co, netdial.EventHubsEndpoint{Namespace: props.FullyQualifiedNamespace, Plain: props.Emulator})
		}
		c, err = azeventhubs.NewConsumerClientFromConnectionString(s.opts.Connection.Reveal(), hub, s.opts.ConsumerGroup, co)
	} else {
		s.setDial(co, netdial.EventHubsEndpoint{Namespace: s.opts.Namespace})
		c, err = azeventhubs.NewConsumerClient(s.opts.Namespace, s.hub, s.opts.ConsumerGroup, s.opts.Credential, co)
	}
	if err != nil {
		return nil, fmt.Errorf("event hub %q: creating client: %w", s.hub, err)
	}
	return c, nil
}

// setDial makes the AMQP connections of a client dialed by internal/netdial
// (TCP keepalive and user timeout: a half-open connection is closed in
// seconds, not at go-amqp's 60 s idle timeout).
func (s *Source) setDial(co *azeventhubs.ConsumerClientOptions, e netdial.EventHubsEndpoint) {
	netdial.SetConsumerDial(co, e)
	if s.opts.dialed == nil || co.NewWebSocketConn == nil {
		return
	}
	dial, seen := co.NewWebSocketConn, s.opts.dialed
	co.NewWebSocketConn = func(ctx context.Context, p azeventhubs.WebSocketConnParams) (net.Conn, error) {
		c, err := dial(ctx, p)
		if err == nil {
			seen(c)
		}
		return c, err
	}
}

// check asks for the hub's properties (hub exists, credentials work) and
// opens a receiver without an owner level on the first partition (consumer
// group exists). It never steals a partition: a receiver without an owner
// level is refused, not preferred, where a replica already reads. It
// returns the number of partitions.
func (s *Source) check(ctx context.Context, probe *azeventhubs.ConsumerClient) (int, error) {
	props, err := probe.GetEventHubProperties(ctx, nil)
	if err != nil {
		return 0, s.explain(err, fmt.Sprintf("event hub %q in namespace %s", s.hub, s.ns))
	}
	if len(props.PartitionIDs) == 0 {
		return 0, fmt.Errorf("event hub %q: no partitions", s.hub)
	}
	s.mu.Lock()
	s.partitions = props.PartitionIDs
	s.mu.Unlock()
	return len(props.PartitionIDs), s.checkGroup(ctx, probe, heldPartition(ctx, probe, props.PartitionIDs))
}

// heldPartition returns a partition that holds an event, where the consumer
// group probe ends as soon as its link opens, or the first partition when
// none answers that it does (the probe then waits probeTimeout: an empty
// hub has nothing waiting to be read). The partitions are asked all at once,
// so the question costs one round trip, not one per partition; the first
// answer that a partition holds one cancels the others, and every call has
// returned when it does.
func heldPartition(ctx context.Context, probe *azeventhubs.ConsumerClient, ids []string) string {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	held := make(chan string, len(ids))
	for _, id := range ids {
		go func() {
			props, err := probe.GetPartitionProperties(ctx, id, nil)
			if err != nil || props.IsEmpty {
				id = ""
			}
			held <- id
		}()
	}
	found := ids[0]
	for range ids {
		if id := <-held; id != "" && ctx.Err() == nil {
			found = id
			cancel()
		}
	}
	return found
}

// checkGroup opens the consumer group probe on partition id.
func (s *Source) checkGroup(ctx context.Context, probe *azeventhubs.ConsumerClient, id string) error {
	pc, err := probe.NewPartitionClient(id, &azeventhubs.PartitionClientOptions{
		StartPosition: azeventhubs.StartPosition{Earliest: ptr(true)},
		Prefetch:      -1,
	})
	if err != nil {
		return fmt.Errorf("event hub %q: %w", s.hub, err)
	}
	defer func() { _ = pc.Close(context.WithoutCancel(ctx)) }()
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	_, err = pc.ReceiveEvents(pctx, 1, nil)
	switch {
	case err == nil, pctx.Err() != nil && ctx.Err() == nil:
		// an event, or the link stayed open until the probe ended: the group exists
		s.log.Debug("consumer group checked", "consumer_group", s.opts.ConsumerGroup, "partition", id)
		return nil
	case isNotFound(err), isUnauthorized(err):
		return s.explain(err, fmt.Sprintf("consumer group %q of event hub %q", s.opts.ConsumerGroup, s.hub))
	case ctx.Err() != nil:
		return fmt.Errorf("event hub %q: checking consumer group %q: %w", s.hub, s.opts.ConsumerGroup, ctx.Err())
	}
	// Anything else proves nothing about the group: most often another
	// replica holds the partition with an owner level, which refuses this
	// receiver (the SDK reports that as a lost connection at attach time).
	s.log.Debug("consumer group probe inconclusive", "consumer_group", s.opts.ConsumerGroup, "err", err)
	return nil
}

// explain turns a failed first call into one error that says what is wrong.
func (s *Source) explain(err error, subject string) error {
	switch {
	case isNotFound(err):
		return fmt.Errorf("%s: %w (check the name and the namespace): %w", subject, ErrNotFound, err)
	case isUnauthorized(err):
		return fmt.Errorf("%s: %w: the connection string or credential was refused (check the key name, the key and its Listen claim): %w", subject, ErrUnauthorized, err)
	}
	return fmt.Errorf("%s: cannot reach the namespace: %w", subject, err)
}

// OwnerID returns the ID this replica writes into ownership leases.
func (s *Source) OwnerID() string { return s.owner }

// Namespace returns the fully qualified namespace (host[:port]) under which
// the source reads and writes its leases and checkpoints in the store.
func (s *Source) Namespace() string { return s.ns }

// ConsumerGroup returns the consumer group the source reads.
func (s *Source) ConsumerGroup() string { return s.opts.ConsumerGroup }

// EventHub returns the event hub name.
func (s *Source) EventHub() string { return s.hub }

// PartitionProperties reads a partition's properties (lag, tools) on the
// source's properties connection, which a failed call replaces.
func (s *Source) PartitionProperties(ctx context.Context, id string) (azeventhubs.PartitionProperties, error) {
	props, err := s.props.PartitionProperties(ctx, id)
	if err == nil && !props.IsEmpty {
		s.lastMu.Lock()
		if s.last == nil {
			s.last = map[string]int64{}
		}
		s.last[id] = max(s.last[id], props.LastEnqueuedSequenceNumber)
		s.lastMu.Unlock()
	}
	return props, err
}

// readLast reads partition id's properties in the background, so that
// Receive knows where the partition ends (heldAfter) from its first
// batches on. A claim from the start position (no checkpoint) would
// otherwise learn it only from the lag poller, up to a second later, and a
// backlog ended by then has its last, partial batch wait MaxWait. A claim
// that resumed from a checkpoint read them already; it is read again all
// the same (one management call per claim), which keeps one path for both.
// The read is bounded by MaxWait, what not knowing costs at most. The
// returned channel is closed when it is over.
func (s *Source) readLast(ctx context.Context, id string) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(ctx, s.opts.Batch.MaxWait)
		defer cancel()
		if _, err := s.PartitionProperties(ctx, id); err != nil {
			s.log.Debug("reading the partition's properties at its claim", "partition", id, "err", err)
		}
	}()
	return done
}

// heldAfter returns how many events partition id held after sequence
// number seq when its properties were last read: 0 when they were never
// read, or when they showed nothing after seq (new events may have come
// since).
func (s *Source) heldAfter(id string, seq int64) int64 {
	s.lastMu.Lock()
	defer s.lastMu.Unlock()
	last, ok := s.last[id]
	if !ok {
		return 0
	}
	return max(last-seq, 0)
}

// Run claims partitions through the SDK processor and calls handle in its
// own goroutine for each partition this replica comes to own, until ctx is
// cancelled. handle's ctx is done when Run is stopping, and also when the
// source heals the partition (a pipeline that stopped receiving) or
// restarts its processor; the handler then drains and returns as for a
// stop. A handler that returns an error matching ErrOwnershipLost just ends
// that partition (the processor claims it again if it still can); one that
// matches ErrGiveUp ends it and gives its lease up; one that wraps a
// failed Receive (a connection lost, not refused credentials) ends it, and
// the processor opens it again at its next round. Any other handler error
// or an invalid checkpoint under the fail policy stops every handler, and
// Run returns it wrapped with the partition.
//
// A failure of the processor's load-balancing loop (the checkpoint store
// unreachable for longer than the retries cover) does not stop Run: the
// handlers drain, and a new processor is started after a capped backoff.
//
// Run returns nil when ctx is cancelled, only after every handler returned.
// Ownership leases are given up only then, so that handlers can flush and
// checkpoint before another replica takes their partitions.
func (s *Source) Run(ctx context.Context, handle func(ctx context.Context, p *Partition) error) error {
	if s.closed.Load() {
		return fmt.Errorf("event hub %q: source is closed", s.hub)
	}
	if !s.started.CompareAndSwap(false, true) {
		return fmt.Errorf("event hub %q: Run called twice", s.hub)
	}
	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	defer s.closeOpened(context.WithoutCancel(ctx), nil)
	var (
		errMu    sync.Mutex
		firstErr error
	)
	fail := func(err error) {
		errMu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		errMu.Unlock()
		stop(err)
	}
	restarts := backoff.Backoff{Initial: restartBackoff, Max: s.opts.LoadBalancing.OwnershipExpiration}
	for {
		began := time.Now()
		cause := s.runProcessor(ctx, runCtx, handle, fail)
		if cause == nil || runCtx.Err() != nil {
			break
		}
		if time.Since(began) > s.opts.LoadBalancing.OwnershipExpiration {
			restarts.Reset() // it had recovered in between
		}
		wait := time.Duration(0)
		if !errors.Is(cause, errHealRestart) {
			wait = restarts.Next()
		} else {
			restarts.Reset()
		}
		s.log.Info("restarting the processor", "after", wait)
		t := time.NewTimer(wait)
		select {
		case <-runCtx.Done():
		case <-t.C:
		}
		t.Stop()
	}
	errMu.Lock()
	defer errMu.Unlock()
	return firstErr
}

// restartBackoff is the first wait before a processor that failed is
// started again; it doubles up to the ownership expiration.
const restartBackoff = time.Second

// errHealRestart is the cause of a processor restart that heals a
// partition owned but not read: the new processor starts at once.
var errHealRestart = errors.New("processor restarted to heal a partition")

// runProcessor runs one SDK processor and a handler per partition it hands
// out, with the watchdog, until runCtx ends (it returns nil) or the
// processor must be restarted (it returns why, after the handlers drained).
func (s *Source) runProcessor(ctx, runCtx context.Context, handle func(ctx context.Context, p *Partition) error, fail func(error)) error {
	genCtx, restart := context.WithCancelCause(runCtx)
	defer restart(nil)
	s.resetStalls()
	store := &resumeStore{CheckpointStore: s.opts.Store, s: s, fail: fail}
	proc, err := azeventhubs.NewProcessor(s.client, store, s.processorOptions())
	if err != nil {
		fail(fmt.Errorf("event hub %q: %w", s.hub, err))
		return nil
	}

	// The processor outlives genCtx on purpose: it stops (and gives its
	// leases up) only after the handlers are done.
	procCtx, stopProc := context.WithCancel(context.WithoutCancel(ctx))
	defer stopProc()
	procDone := make(chan struct{})
	go func() {
		defer close(procDone)
		s.runSDKProcessor(procCtx, proc, restart)
	}()

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.watch(genCtx, restart)
	}()
	for {
		pc := proc.NextPartitionClient(genCtx)
		if pc == nil {
			break
		}
		if genCtx.Err() != nil {
			s.closePartition(pc)
			break
		}
		if s.refuseUnresolved(genCtx, pc) {
			continue
		}
		pctx, cancel := context.WithCancelCause(genCtx)
		p := s.newPartition(pctx, pc, cancel)
		s.markRunning(p)
		s.log.Info("partition claimed", append([]any{"partition", p.id}, s.takeStart(p.id)...)...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cancel(nil)
			err := handle(pctx, p)
			if errors.Is(err, ErrGiveUp) {
				// The lease goes first: the closes below may wait out
				// their timeout over a connection that stopped answering
				// (the very reason for some give-ups), and the lease with
				// them. partitionEnded's release is then a no-op.
				s.giveUpLease(genCtx, p.id)
			}
			p.closeReader()
			s.closePartition(pc)
			s.ended(p)
			s.partitionEnded(genCtx, runCtx, pctx, p, err, fail)
		}()
	}
	wg.Wait()
	cause := context.Cause(genCtx)
	restarting := runCtx.Err() == nil && cause != nil
	if restarting {
		store.keepLeases.Store(true)
	}
	stopProc()
	<-procDone
	if restarting {
		return cause
	}
	return nil
}

// runSDKProcessor runs the SDK processor until procCtx ends. The processor
// stopping on its own (an error, or nil before procCtx ended) is a failure
// of this generation: it is logged and restarts the generation with the
// cause, so its partitions drain and a new processor starts.
func (s *Source) runSDKProcessor(procCtx context.Context, proc *azeventhubs.Processor, restart context.CancelCauseFunc) {
	err := proc.Run(procCtx)
	if procCtx.Err() != nil {
		return
	}
	if err == nil {
		err = errors.New("stopped")
	}
	err = fmt.Errorf("event hub %q: processor: %w", s.hub, err)
	s.log.Error("processor failed; its partitions drain and a new one starts", "err", err)
	s.healed(healProcessorFailed)
	restart(err)
}

// refuseUnresolved reports whether the processor opened pc from a
// placeholder position (its resume position could not be looked up). Such
// a partition must not be read: it is closed unread (which also
// unregisters it from the processor) and its lease let go, so that this or
// another replica claims it again.
func (s *Source) refuseUnresolved(genCtx context.Context, pc *azeventhubs.ProcessorPartitionClient) bool {
	err := s.takeUnresolved(pc.PartitionID())
	if err == nil {
		return false
	}
	s.closePartition(pc)
	s.release(genCtx, pc.PartitionID())
	s.log.Warn("partition not started: its resume position is unknown; lease given up until the next claim", "partition", pc.PartitionID(), "err", err)
	return true
}

// partitionEnded says what the end of a partition's handler means, after
// its reader and client are closed: a release, a loss another replica
// caused, a give-up whose lease is freed for a replica that can serve it,
// a restart that did not drain cleanly, or a failure of this replica,
// which fail reports.
func (s *Source) partitionEnded(genCtx, runCtx, pctx context.Context, p *Partition, err error, fail func(error)) {
	switch {
	case err == nil:
		s.log.Info("partition released", "partition", p.id)
	case errors.Is(err, ErrOwnershipLost):
		// Receive or Checkpoint logged the loss
	case errors.Is(err, ErrGiveUp):
		s.giveUpLease(genCtx, p.id)
		s.log.Warn("partition given up; its lease is free for a replica that can serve it", "partition", p.id, "err", err)
	case pctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
		s.log.Info("partition released", "partition", p.id)
	case p.takenOver(context.WithoutCancel(pctx)):
		// the failure came from losing the partition (for example a
		// sink commit undone by the new owner's recovery): not a
		// failure of this replica
		s.log.Warn("partition lost", "partition", p.id, "err", err)
	case runCtx.Err() == nil && pctx.Err() != nil:
		// stopped to be healed or for a processor restart: what it
		// did not commit is replayed from the sink's watermark
		s.log.Warn("partition stopped for a restart did not drain cleanly", "partition", p.id, "err", err)
	case errors.Is(err, errReceiveFailed) && runCtx.Err() != nil:
		s.log.Warn("partition receive failed while stopping", "partition", p.id, "err", err)
	case errors.Is(err, errReceiveFailed):
		// The lease stays: the processor hands the partition out again
		// at its next round, on a connection it opens again. Handing
		// the partition to another replica when this one stays cut off
		// is the handler's call (ErrGiveUp).
		s.log.Warn("partition receive failed; reopening it at the next claim round", "partition", p.id, "err", err)
	default:
		fail(fmt.Errorf("event hub %q partition %s: %w", s.hub, p.id, err))
	}
}

func (s *Source) closePartition(pc *azeventhubs.ProcessorPartitionClient) {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	if err := pc.Close(ctx); err != nil {
		s.log.Debug("closing partition client", "partition", pc.PartitionID(), "err", err)
	}
}

func (s *Source) processorOptions() *azeventhubs.ProcessorOptions {
	def, _ := parseStart(s.opts.Start)
	per := map[string]azeventhubs.StartPosition{}
	for id, v := range s.opts.StartPartitions {
		per[id], _ = parseStart(v)
	}
	return &azeventhubs.ProcessorOptions{
		LoadBalancingStrategy:       azeventhubs.ProcessorStrategy(strings.ToLower(s.opts.LoadBalancing.Strategy)),
		UpdateInterval:              s.opts.LoadBalancing.UpdateInterval,
		PartitionExpirationDuration: s.opts.LoadBalancing.OwnershipExpiration,
		StartPositions:              azeventhubs.StartPositions{Default: def, PerPartition: per},
		Prefetch:                    s.claimPrefetch(def, per),
	}
}

// claimPrefetch is the prefetch of the processor's partition links. With
// reader connections those links only stake the claim and are never read
// (connections.go), yet a link that prefetches is sent its prefetch of
// events as soon as it attaches, until the reader's link takes the
// partition over: with four partitions, 8,000 events the emulator or the
// service encodes and the processor's connection decodes for nothing, on
// the connection that also carries the claims' CBS negotiations, which
// queue behind those frames. The partitions claimed last then started
// reading hundreds of milliseconds after the first. So the claim links
// get no credit (a negative prefetch: the SDK issues credit per receive),
// unless one of them may be read: a partition that starts at "latest"
// stays on its processor link, as does one whose reader fails to open,
// which then receives at most maxPrefetch per call, so a larger
// batch.max_events keeps the configured prefetch.
func (s *Source) claimPrefetch(def azeventhubs.StartPosition, per map[string]azeventhubs.StartPosition) int32 {
	latest := func(p azeventhubs.StartPosition) bool { return p.Latest != nil && *p.Latest }
	readable := s.readers == nil || latest(def) || s.opts.Batch.MaxEvents > maxPrefetch || s.opts.claimPrefetch
	for _, p := range per {
		readable = readable || latest(p)
	}
	if readable {
		return int32(s.prefetch)
	}
	return -1
}

// Close closes the connection to the event hub. It does not close the
// checkpoint store. It is idempotent; call it after Run returned.
func (s *Source) Close(ctx context.Context) error {
	if !s.closed.CompareAndSwap(false, true) || s.client == nil {
		return nil
	}
	err := errors.Join(s.client.Close(ctx), s.props.close(ctx))
	if s.readers != nil {
		err = errors.Join(err, s.readers.close(ctx))
	}
	if err != nil {
		return fmt.Errorf("event hub %q: close: %w", s.hub, err)
	}
	return nil
}

func ptr[T any](v T) *T { return &v }
