package netdial

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/emulator"
	"github.com/ehsink/ehsink/emulator/emulatortest"
)

// dialLog wraps the hooks SetProducerDial and SetConsumerDial installed:
// it checks the socket of every connection at its dial (the connection is
// gone by the end of the test) and counts them.
type dialLog struct {
	t    *testing.T
	mu   sync.Mutex
	n    int
	addr map[string]bool
}

func (d *dialLog) wrap(dial EventHubsDial) EventHubsDial {
	d.t.Helper()
	if dial == nil {
		d.t.Fatal("no dial hook installed: the SDK would dial itself")
	}
	return func(ctx context.Context, p azeventhubs.WebSocketConnParams) (net.Conn, error) {
		c, err := dial(ctx, p)
		if err != nil {
			return c, err
		}
		tcp := c
		if tc, ok := c.(*tls.Conn); ok {
			tcp = tc.NetConn()
		}
		checkSocket(d.t, tcp)
		d.mu.Lock()
		d.n++
		if d.addr == nil {
			d.addr = map[string]bool{}
		}
		d.addr[c.RemoteAddr().String()] = true
		d.mu.Unlock()
		return c, nil
	}
}

func (d *dialLog) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n
}

// roundTrip sends bodies to partition (empty at the start) with a producer and reads them
// back with a consumer, both built from conn with the options given and
// the Event Hubs dial of this package (wrapped by log).
func roundTrip(t *testing.T, conn, partition string, tlsCfg *tls.Config, log *dialLog, bodies ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e, err := EventHubsConnectionString(conn)
	if err != nil {
		t.Fatal(err)
	}
	noRetry := azeventhubs.RetryOptions{MaxRetries: -1}
	po := &azeventhubs.ProducerClientOptions{TLSConfig: tlsCfg, RetryOptions: noRetry}
	SetProducerDial(po, e)
	po.NewWebSocketConn = log.wrap(po.NewWebSocketConn)
	p, err := azeventhubs.NewProducerClientFromConnectionString(conn, "", po)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	batch, err := p.NewEventDataBatch(ctx, &azeventhubs.EventDataBatchOptions{PartitionID: &partition})
	if err != nil {
		t.Fatalf("NewEventDataBatch: %v", err)
	}
	for _, b := range bodies {
		if err := batch.AddEventData(&azeventhubs.EventData{Body: []byte(b)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.SendEventDataBatch(ctx, batch, nil); err != nil {
		t.Fatalf("SendEventDataBatch: %v", err)
	}

	co := &azeventhubs.ConsumerClientOptions{TLSConfig: tlsCfg, RetryOptions: noRetry}
	SetConsumerDial(co, e)
	co.NewWebSocketConn = log.wrap(co.NewWebSocketConn)
	c, err := azeventhubs.NewConsumerClientFromConnectionString(conn, "", azeventhubs.DefaultConsumerGroup, co)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	pc, err := c.NewPartitionClient(partition, &azeventhubs.PartitionClientOptions{StartPosition: azeventhubs.StartPosition{Earliest: ptr(true)}})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close(context.Background())
	var got []string
	for len(got) < len(bodies) && ctx.Err() == nil {
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		evs, err := pc.ReceiveEvents(rctx, len(bodies)-len(got), nil)
		rcancel()
		if err != nil && rctx.Err() == nil {
			t.Fatalf("ReceiveEvents: %v", err)
		}
		for _, ev := range evs {
			got = append(got, string(ev.Body))
		}
	}
	if len(got) != len(bodies) {
		t.Fatalf("received %q, want %q", got, bodies)
	}
	for i := range bodies {
		if got[i] != bodies[i] {
			t.Fatalf("received %q, want %q", got, bodies)
		}
	}
	if log.count() < 2 {
		t.Fatalf("%d connections dialed, want one per client at least", log.count())
	}
}

func ptr[T any](v T) *T { return &v }

// TestEventHubsDialEmulatorTCP: against the emulator in the SDK's emulator
// mode (UseDevelopmentEmulator=true, AMQP over plain TCP), every AMQP
// connection of a producer and a consumer is dialed here, carries the
// keepalive and user timeout, and events go through.
func TestEventHubsDialEmulatorTCP(t *testing.T) {
	srv := emulatortest.Start(t, emulator.Config{Hubs: []emulator.HubConfig{{Name: "orders", Partitions: 2}}})
	log := &dialLog{t: t}
	bodies := make([]string, 20)
	for i := range bodies {
		bodies[i] = "e" + strconv.Itoa(i)
	}
	roundTrip(t, srv.ConnectionString("orders"), "0", nil, log, bodies...)
	if !log.addr[srv.Addr()] || len(log.addr) != 1 {
		t.Errorf("dialed %v, want the emulator's %s only", log.addr, srv.Addr())
	}
}

// TestEventHubsDialEmulatorTLS: against the emulator's AMQPS listener with
// a connection string without the emulator mode (what a real namespace
// gets: amqps, TLS verified), the connections are TLS over a socket of
// Dialer, with the client's TLS config (its trusted roots), and events go
// through. The name verified is the host without its port: a config
// without ServerName verifies 127.0.0.1 (the SDK's own dial verifies
// "127.0.0.1:PORT", which no certificate holds); one with ServerName keeps
// it.
func TestEventHubsDialEmulatorTLS(t *testing.T) {
	srv := emulatortest.Start(t, emulator.Config{
		Hubs: []emulator.HubConfig{{Name: "orders", Partitions: 2}},
		TLS:  &emulator.TLSOptions{Addr: "127.0.0.1:0"},
	})
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(srv.CertificatePEM()) {
		t.Fatal("emulator certificate does not parse")
	}
	conn := srv.TLSConnectionString("orders")
	t.Run("ServerName from the endpoint", func(t *testing.T) {
		log := &dialLog{t: t}
		roundTrip(t, conn, "0", &tls.Config{RootCAs: pool}, log, "a", "b")
		if !log.addr[srv.TLSAddr()] || len(log.addr) != 1 {
			t.Errorf("dialed %v, want the emulator's AMQPS %s only", log.addr, srv.TLSAddr())
		}
	})
	t.Run("ServerName of the config", func(t *testing.T) {
		roundTrip(t, conn, "1", &tls.Config{RootCAs: pool, ServerName: "localhost"}, &dialLog{t: t}, "c")
	})
	t.Run("untrusted", func(t *testing.T) {
		e, err := EventHubsConnectionString(conn)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := EventHubs(e, &tls.Config{RootCAs: x509.NewCertPool()})(ctx, azeventhubs.WebSocketConnParams{})
		if err == nil {
			c.Close()
			t.Fatal("a TLS config that does not trust the emulator's certificate connected")
		}
		var unknown x509.UnknownAuthorityError
		if !errors.As(err, &unknown) {
			t.Fatalf("got %v, want an unknown authority error", err)
		}
	})
}
