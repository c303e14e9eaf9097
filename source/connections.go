package source

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
)

// More than one AMQP connection per process.
//
// One SDK connection decodes every frame of every partition on one reader
// goroutine (go-amqp's connection reader, then the session and link mux),
// so one connection caps what a process drains whatever the cores. With
// Options.Connections above 1, the processor keeps its own connection for
// what is shared (ownership leases through the checkpoint store, the
// partition links it opens to stake a claim) and each claimed partition is
// received on a PartitionClient of one of N reader connections, the one
// with the fewest partitions at the time.
//
// The reader link uses the processor's owner level (0): on the service an
// equal owner level takes a partition over, so the reader's first receive
// detaches the processor's own link of the claim, which is never read, and
// a replica that claims the partition later takes it from the reader the
// same way, which Receive reports as ErrOwnershipLost as before. The owner
// ID in the leases, the load balancer and the checkpoints stay the
// processor's: there is one owner per process.
//
// The reader starts where the processor's link started: the position the
// resume store last handed to the processor for the partition (a
// checkpoint or the sink's watermark, both committed), else the configured
// start. A partition that starts at "latest" stays on the processor's link:
// latest is a moment, and the reader's first receive comes after the
// processor's attach, which would skip what arrived in between. (Such a
// partition has no backlog to drain; it moves to a reader at its next
// claim, from its checkpoint.)

// readerAttachWait bounds a reader's first receive, instead of MaxWait: it
// attaches the link (a claim negotiated over the connection's CBS link,
// serialised with the other partitions of the connection), which on a busy
// machine took longer than a second. The first receive asks for one event,
// so that it returns as soon as the partition has one; the watchdog sees
// heartbeats meanwhile.
const readerAttachWait = 10 * time.Second

// receiver is what Partition.Receive reads from: the processor's partition
// client or a reader's.
type receiver interface {
	ReceiveEvents(ctx context.Context, count int, options *azeventhubs.ReceiveEventsOptions) ([]*azeventhubs.ReceivedEventData, error)
}

// readerPool holds the reader connections. Its methods are safe for
// concurrent use.
type readerPool struct {
	mu      sync.Mutex // guards load
	clients []*azeventhubs.ConsumerClient
	load    []int // partitions receiving on each client
}

// newReaders opens n reader connections (n > 1), named after the owner,
// within ctx: a management call on each makes it connect and authenticate
// now, not in a partition's first receive. They connect at once, not one
// after another: each is a TLS handshake and a claim against Azure.
func (s *Source) newReaders(ctx context.Context, n int) (*readerPool, error) {
	r := &readerPool{load: make([]int, n), clients: make([]*azeventhubs.ConsumerClient, n)}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		c, err := s.newClient(&azeventhubs.ConsumerClientOptions{
			InstanceID:   s.opts.InstanceID + "-r" + strconv.Itoa(i+1),
			RetryOptions: s.opts.clientRetry,
		})
		if err != nil {
			errs[i] = err
			break
		}
		r.clients[i] = c
		wg.Go(func() {
			if _, err := c.GetEventHubProperties(ctx, nil); err != nil {
				errs[i] = fmt.Errorf("event hub %q: reader connection %d: %w", s.hub, i+1, err)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil { // the first: the others are most often the same
			_ = r.close(context.WithoutCancel(ctx))
			return nil, err
		}
	}
	return r, nil
}

// take returns the client with the fewest partitions and counts one more on it.
func (r *readerPool) take() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	best := 0
	for i, n := range r.load {
		if n < r.load[best] {
			best = i
		}
	}
	r.load[best]++
	return best
}

func (r *readerPool) put(i int) {
	r.mu.Lock()
	r.load[i]--
	r.mu.Unlock()
}

func (r *readerPool) close(ctx context.Context) error {
	var first error
	for _, c := range r.clients {
		if c == nil { // newReaders failed before it
			continue
		}
		if err := c.Close(ctx); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// reader returns what the partition of pc is received from, and the
// function that closes it (before pc is closed).
func (s *Source) reader(pc *azeventhubs.ProcessorPartitionClient) (receiver, func()) {
	nothing := func() {}
	if s.readers == nil {
		return pc, nothing
	}
	id := pc.PartitionID()
	start := s.processorStart(id)
	if start.Latest != nil && *start.Latest {
		return pc, nothing
	}
	r, closeIt, err := s.openReader(id, start)
	if err != nil {
		s.log.Warn("partition read on the processor's connection: opening a reader failed", "partition", id, "err", err)
		return pc, nothing
	}
	return r, closeIt
}

// openReader opens a PartitionClient of partition id at start, on the
// reader connection with the fewest partitions, or on the processor's
// connection when there are no reader connections, and the function that
// closes it.
func (s *Source) openReader(id string, start azeventhubs.StartPosition) (receiver, func(), error) {
	client, put := s.client, func() {}
	if s.readers != nil {
		i := s.readers.take()
		client, put = s.readers.clients[i], func() { s.readers.put(i) }
	}
	own, err := client.NewPartitionClient(id, &azeventhubs.PartitionClientOptions{
		StartPosition: start,
		OwnerLevel:    ptr(int64(0)), // the processor's: see the top of this file
		Prefetch:      int32(s.prefetch),
	})
	if err != nil {
		put()
		return nil, nil, err
	}
	s.log.Debug("partition reads on a client of its own", "partition", id)
	return own, func() {
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		if err := own.Close(ctx); err != nil {
			s.log.Debug("closing partition reader", "partition", id, "err", err)
		}
		put()
	}, nil
}

// noteStarts records the checkpoints the resume store handed to the
// processor: where the processor's link of a claim starts.
func (s *Source) noteStarts(cps []azeventhubs.Checkpoint) {
	starts := make(map[string]azeventhubs.Checkpoint, len(cps))
	for _, cp := range cps {
		starts[cp.PartitionID] = cp
	}
	s.mu.Lock()
	s.starts = starts
	s.mu.Unlock()
}

// processorStart is the start position the processor chose for partition
// id, worked out as it does (azeventhubs v2.0.2 Processor.getStartPosition):
// the checkpoint's offset, else its sequence number, both exclusive; with
// no checkpoint, the partition's start, else the default start.
func (s *Source) processorStart(id string) azeventhubs.StartPosition {
	s.mu.Lock()
	cp, ok := s.starts[id]
	s.mu.Unlock()
	switch {
	case ok && cp.Offset != nil:
		return azeventhubs.StartPosition{Offset: cp.Offset}
	case ok && cp.SequenceNumber != nil:
		return azeventhubs.StartPosition{SequenceNumber: cp.SequenceNumber}
	}
	if v, ok := s.opts.StartPartitions[id]; ok {
		start, _ := parseStart(v)
		return start
	}
	start, _ := parseStart(s.opts.Start)
	return start
}

// maxConnections is the largest Options.Connections.
const maxConnections = 64
