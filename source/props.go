package source

import (
	"context"
	"fmt"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
)

// propsClient is the connection partition-properties calls go through,
// apart from the processor's. A failed call drops it, and the next call
// dials a new one.
//
// Why not the processor's client: the SDK sends a management request with
// no deadline of its own (the caller's context bounds only the wait for
// the link), and repairs a lost connection only from inside the retry of a
// call whose context is still alive. After the namespace drops a
// connection, a call bounded by a resume budget shorter than the SDK's
// retry therefore ends before the repair, and every later call meets the
// same dead link: the partitions being claimed never get a resume position.
// A fresh connection per failure cannot be stuck that way.
type propsClient struct {
	dial func() (*azeventhubs.ConsumerClient, error)

	mu     sync.Mutex // guards c and closed
	c      *azeventhubs.ConsumerClient
	closed bool
}

// get returns the current client, dialling one if there is none.
func (p *propsClient) get() (*azeventhubs.ConsumerClient, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errSourceClosed
	}
	if p.c == nil {
		c, err := p.dial()
		if err != nil {
			return nil, err
		}
		p.c = c
	}
	return p.c, nil
}

// drop closes c if it is still the current client, so the next call dials
// a new connection. Closing also ends a request still waiting on c.
func (p *propsClient) drop(c *azeventhubs.ConsumerClient) {
	p.mu.Lock()
	if p.c != c {
		p.mu.Unlock()
		return
	}
	p.c = nil
	p.mu.Unlock()
	go func() { _ = c.Close(context.Background()) }()
}

// PartitionProperties reads a partition's properties. A failure drops the
// connection it used, so a retry goes through a new one.
//
// It returns when ctx ends even if the SDK's call does not: over a
// connection that stopped answering, the SDK waits for the management
// response whatever the context (it bounds only the wait for the link), so
// a caller bounding the call (the lag poller, a claim's resume budget)
// would hang until go-amqp's idle timeout, 60 s. The connection is then
// dropped, and closing it ends the call left behind.
func (p *propsClient) PartitionProperties(ctx context.Context, id string) (azeventhubs.PartitionProperties, error) {
	return propsCall(ctx, p, func(c *azeventhubs.ConsumerClient) (azeventhubs.PartitionProperties, error) {
		return c.GetPartitionProperties(ctx, id, nil)
	})
}

// PartitionIDs reads the hub's partitions, as PartitionProperties reads a
// partition's properties.
func (p *propsClient) PartitionIDs(ctx context.Context) ([]string, error) {
	props, err := propsCall(ctx, p, func(c *azeventhubs.ConsumerClient) (azeventhubs.EventHubProperties, error) {
		return c.GetEventHubProperties(ctx, nil)
	})
	return props.PartitionIDs, err
}

// propsCall runs one management call on p's current client, returning
// when ctx ends whatever the call does, and dropping the client when the
// call fails or does not answer.
func propsCall[T any](ctx context.Context, p *propsClient, call func(*azeventhubs.ConsumerClient) (T, error)) (T, error) {
	var zero T
	c, err := p.get()
	if err != nil {
		return zero, err
	}
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := call(c)
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			p.drop(c)
		}
		return r.v, r.err
	case <-ctx.Done():
		p.drop(c)
		return zero, fmt.Errorf("no answer: %w", ctx.Err())
	}
}

// close closes the current client; later calls fail.
func (p *propsClient) close(ctx context.Context) error {
	p.mu.Lock()
	c := p.c
	p.c, p.closed = nil, true
	p.mu.Unlock()
	if c == nil {
		return nil
	}
	return c.Close(ctx)
}
