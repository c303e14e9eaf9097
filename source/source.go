package source

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
)

// probeTimeout bounds the consumer group probe of New: the attach is refused
// at once when the group is missing, so waiting longer proves nothing more.
// The probe reads from the earliest event, so it ends at once on a partition
// that holds events.
const probeTimeout = 2 * time.Second

// closeTimeout bounds closing a partition client after its handler returned.
const closeTimeout = 10 * time.Second

// Source reads one event hub in one consumer group. Build it with [New],
// start it with [Source.Run], release it with [Source.Close]. Its methods
// are safe for concurrent use; Run may be called once.
type Source struct {
	opts    Options
	policy  Policy
	client  *azeventhubs.ConsumerClient
	ns      string // fully qualified namespace as the SDK sees it (host[:port])
	hub     string
	owner   string
	log     *slog.Logger
	started atomic.Bool
	closed  atomic.Bool

	mu       sync.Mutex                         // guards the 2 following fields
	claimed  map[string]bool                    // partitions this replica owned after the last ClaimOwnership
	resolved map[string]*azeventhubs.Checkpoint // resume positions worked out for claimed partitions not yet released (nil: start position)
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
	opts = opts.withDefaults()
	policy, _ := ParsePolicy(opts.OnInvalidCheckpoint)
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
	if err := s.check(ctx, probe); err != nil {
		return nil, err
	}
	s.client, err = s.newClient(&azeventhubs.ConsumerClientOptions{InstanceID: opts.InstanceID})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// resolveHub returns the event hub name and the namespace of opts.
func resolveHub(opts Options) (hub, ns string, err error) {
	if opts.Connection == "" {
		return opts.EventHub, opts.Namespace, nil
	}
	// The SDK's parse errors name the missing key, never the value.
	props, err := azeventhubs.ParseConnectionString(opts.Connection.Reveal())
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
	var (
		c   *azeventhubs.ConsumerClient
		err error
	)
	if s.opts.Connection != "" {
		hub := s.hub
		if props, perr := azeventhubs.ParseConnectionString(s.opts.Connection.Reveal()); perr == nil && props.EntityPath != nil && *props.EntityPath != "" {
			hub = "" // the SDK refuses a hub name given twice
		}
		c, err = azeventhubs.NewConsumerClientFromConnectionString(s.opts.Connection.Reveal(), hub, s.opts.ConsumerGroup, co)
	} else {
		c, err = azeventhubs.NewConsumerClient(s.opts.Namespace, s.hub, s.opts.ConsumerGroup, s.opts.Credential, co)
	}
	if err != nil {
		return nil, fmt.Errorf("event hub %q: creating client: %w", s.hub, err)
	}
	return c, nil
}

// check asks for the hub's properties (hub exists, credentials work) and
// opens a receiver without an owner level on the first partition (consumer
// group exists). It never steals a partition: a receiver without an owner
// level is refused, not preferred, where a replica already reads.
func (s *Source) check(ctx context.Context, probe *azeventhubs.ConsumerClient) error {
	props, err := probe.GetEventHubProperties(ctx, nil)
	if err != nil {
		return s.explain(err, fmt.Sprintf("event hub %q in namespace %s", s.hub, s.ns))
	}
	if len(props.PartitionIDs) == 0 {
		return fmt.Errorf("event hub %q: no partitions", s.hub)
	}
	pc, err := probe.NewPartitionClient(props.PartitionIDs[0], &azeventhubs.PartitionClientOptions{
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

// EventHub returns the event hub name.
func (s *Source) EventHub() string { return s.hub }

// Client returns the consumer client, for properties queries (lag, tools).
// It stays owned by s: do not close it.
func (s *Source) Client() *azeventhubs.ConsumerClient { return s.client }

// Run claims partitions through the SDK processor and calls handle in its
// own goroutine for each partition this replica comes to own, until ctx is
// cancelled. handle's ctx is done when Run is stopping; a handler that
// returns an error matching ErrOwnershipLost just ends that partition (the
// processor claims it again if it still can). Any other handler error, a
// failure of the load-balancing loop or an invalid checkpoint under the fail
// policy stops every handler, and Run returns it wrapped with the partition.
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

	store := &resumeStore{CheckpointStore: s.opts.Store, s: s, fail: fail}
	proc, err := azeventhubs.NewProcessor(s.client, store, s.processorOptions())
	if err != nil {
		return fmt.Errorf("event hub %q: %w", s.hub, err)
	}

	// The processor outlives runCtx on purpose: it stops (and gives its
	// leases up) only after the handlers are done.
	procCtx, stopProc := context.WithCancel(context.WithoutCancel(ctx))
	defer stopProc()
	procDone := make(chan struct{})
	go func() {
		defer close(procDone)
		if err := proc.Run(procCtx); err != nil {
			fail(fmt.Errorf("event hub %q: processor: %w", s.hub, err))
		} else if procCtx.Err() == nil {
			fail(fmt.Errorf("event hub %q: processor stopped", s.hub))
		}
	}()

	var wg sync.WaitGroup
	for {
		pc := proc.NextPartitionClient(runCtx)
		if pc == nil {
			break
		}
		if runCtx.Err() != nil {
			s.closePartition(pc)
			break
		}
		p := s.newPartition(pc)
		s.log.Info("partition claimed", "partition", p.id)
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := handle(runCtx, p)
			s.closePartition(pc)
			s.forget(p.id)
			switch {
			case err == nil:
				s.log.Info("partition released", "partition", p.id)
			case errors.Is(err, ErrOwnershipLost):
				// Receive or Checkpoint logged the loss
			case runCtx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
				s.log.Info("partition released", "partition", p.id)
			case p.takenOver(context.WithoutCancel(runCtx)):
				// the failure came from losing the partition (for example a
				// sink commit undone by the new owner's recovery): not a
				// failure of this replica
				s.log.Warn("partition lost", "partition", p.id, "err", err)
			default:
				fail(fmt.Errorf("event hub %q partition %s: %w", s.hub, p.id, err))
			}
		}()
	}
	wg.Wait()
	stopProc()
	<-procDone

	errMu.Lock()
	defer errMu.Unlock()
	return firstErr
}

// forget drops the resume position of partition id: the next claim works it
// out again.
func (s *Source) forget(id string) {
	s.mu.Lock()
	delete(s.resolved, id)
	s.mu.Unlock()
}

func (s *Source) closePartition(pc *azeventhubs.ProcessorPartitionClient) {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	if err := pc.Close(ctx); err != nil {
		s.log.Debug("closing partition client", "partition", pc.PartitionID(), "err", err)
	}
}

func (s *Source) processorOptions() *azeventhubs.ProcessorOptions {
	def, _ := ParseStart(s.opts.Start)
	per := map[string]azeventhubs.StartPosition{}
	for id, v := range s.opts.StartPartitions {
		per[id], _ = ParseStart(v)
	}
	prefetch := int32(s.opts.Prefetch)
	return &azeventhubs.ProcessorOptions{
		LoadBalancingStrategy:       azeventhubs.ProcessorStrategy(strings.ToLower(s.opts.Strategy)),
		UpdateInterval:              s.opts.UpdateInterval,
		PartitionExpirationDuration: s.opts.OwnershipExpiration,
		StartPositions:              azeventhubs.StartPositions{Default: def, PerPartition: per},
		Prefetch:                    prefetch,
	}
}

// Close closes the connection to the event hub. It does not close the
// checkpoint store. It is idempotent; call it after Run returned.
func (s *Source) Close(ctx context.Context) error {
	if !s.closed.CompareAndSwap(false, true) || s.client == nil {
		return nil
	}
	if err := s.client.Close(ctx); err != nil {
		return fmt.Errorf("event hub %q: close: %w", s.hub, err)
	}
	return nil
}

func ptr[T any](v T) *T { return &v }
