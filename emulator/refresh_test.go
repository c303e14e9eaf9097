package emulator

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/internal/secret"
)

// pipeListener is an in-memory net.Listener: Dial hands one end of a
// net.Pipe to Accept. Inside a synctest bubble its blocking is durable,
// so fake time advances while both sides wait.
type pipeListener struct {
	conns     chan net.Conn
	done      chan struct{}
	closeOnce sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

func (l *pipeListener) Dial(ctx context.Context, _ azeventhubs.WebSocketConnParams) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "emulator.pipe:5672" }

// TestSDKTokenRefresh: a receiver outlives many token lifetimes because
// the SDK re-puts its token on $cbs and the emulator takes the refreshed
// claim. The SDK signs 2-hour tokens and refreshes every 5 minutes; under
// testing/synctest the clock is fake, so the test covers 2.5 hours (past
// the first token's expiry, where an unrefreshed link is detached, see
// TestSDKTokenExpiryDetaches) in moments. The SDK reaches the emulator's
// Serve through an in-memory listener (its NewWebSocketConn hook).
func TestSDKTokenRefresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const key = "c2VjcmV0LWtleQ=="
		srv, err := New(Config{Hubs: []HubConfig{{Name: "orders", Partitions: 1}}, Keys: map[string]secret.String{"root": key}, Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		ln := newPipeListener()
		served := make(chan error, 1)
		go func() { served <- srv.Serve(ln) }()
		// Everything started in the bubble must end before it does, on
		// failure too (deferred calls run after t.Fatal).
		defer func() {
			if err := srv.Shutdown(context.Background()); err != nil {
				t.Error(err)
			}
			if err := <-served; err != nil {
				t.Error(err)
			}
		}()
		cs := fmt.Sprintf("Endpoint=sb://%s;SharedAccessKeyName=root;SharedAccessKey=%s;EntityPath=orders;UseDevelopmentEmulator=true", ln.Addr(), key)
		p, err := azeventhubs.NewProducerClientFromConnectionString(cs, "", &azeventhubs.ProducerClientOptions{NewWebSocketConn: ln.Dial})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close(context.Background())
		c, err := azeventhubs.NewConsumerClientFromConnectionString(cs, "", azeventhubs.DefaultConsumerGroup, &azeventhubs.ConsumerClientOptions{NewWebSocketConn: ln.Dial})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(context.Background())
		pc, err := c.NewPartitionClient("0", &azeventhubs.PartitionClientOptions{StartPosition: azeventhubs.StartPosition{Earliest: ptr(true)}})
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close(context.Background())
		start := time.Now()
		for i := 0; time.Since(start) < 150*time.Minute; i++ {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			batch, err := p.NewEventDataBatch(ctx, nil)
			if err == nil {
				err = batch.AddEventData(&azeventhubs.EventData{Body: fmt.Appendf(nil, "e%d", i)}, nil)
			}
			if err == nil {
				err = p.SendEventDataBatch(ctx, batch, nil)
			}
			if err != nil {
				t.Fatalf("send %d after %s: %v", i, time.Since(start), err)
			}
			evs, err := pc.ReceiveEvents(ctx, 1, nil)
			cancel()
			if err != nil || len(evs) != 1 || string(evs[0].Body) != fmt.Sprintf("e%d", i) {
				t.Fatalf("receive %d after %s: %v %v", i, time.Since(start), evs, err)
			}
			time.Sleep(10 * time.Minute) // fake time: the clock of the bubble
		}
		// The SDK recovers a detached link by itself (a new put-token and
		// attach), so receiving alone does not prove the refresh: the
		// emulator must never have detached a link for an expired token.
		if n := srv.expired.Load(); n != 0 {
			t.Fatalf("%d links were detached for expired tokens: the refreshed tokens were not taken", n)
		}
	})
}
