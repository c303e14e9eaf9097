package emulator

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ehsink/ehsink/emulator/internal/hub"
	"github.com/ehsink/ehsink/emulator/internal/schemas"
)

// Server is a running emulator. Its methods are safe for concurrent use.
type Server struct {
	cfg     Config
	log     *slog.Logger
	ns      *hub.Namespace
	ln      net.Listener // the plain AMQP listener of Start, or the first one Serve got
	tlsLn   net.Listener // the AMQPS listener of Start, when Config.TLS is set
	certPEM []byte       // the certificate AMQPS clients trust
	admin   *http.Server
	adminLn net.Listener

	registry   *http.Server   // the schema registries, with Config.SchemaRegistryAddr
	registryLn net.Listener   // its listener
	schemas    *schemas.Store // their schemas

	policies map[string]Policy // SAS policies by key name; empty: every token is good

	latency  atomic.Int64 // nanoseconds added before each send and RPC
	dropped  atomic.Int64 // connections closed for I/O errors or idleness (for tests and logs)
	accepted atomic.Int64 // connections accepted since Start
	expired  atomic.Int64 // links detached because their token expired (for tests)

	failProps atomic.Int64 // partition-properties reads still to fail (fault injection)

	mu         sync.Mutex // guards conns, listeners, closed, protoErrs (and s.ln when Serve sets it)
	conns      map[*conn]struct{}
	listeners  map[net.Listener]struct{}
	closed     bool
	protoErrs  []string // the first maxProtoErrs protocol errors that closed a connection
	protoCount int      // all of them

	wg           sync.WaitGroup // accept loops, connections, admin server
	shutdownOnce sync.Once
	shutdownErr  error
}

// ErrServerClosed is returned by Serve after Shutdown has begun.
var ErrServerClosed = errors.New("emulator: server closed")

// New opens the hub store and returns a server that listens nowhere yet:
// hand it listeners with Serve (for embedding: a listener of your own, a
// TLS listener, an in-memory one). Shutdown closes the store. Start is New
// plus the listeners of cfg.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("emulator: config: %w", err)
	}
	cfg = cfg.withDefaults()
	hubCfg := hub.Config{DataDir: cfg.DataDir, Retention: cfg.Retention, RetentionBytes: cfg.RetentionBytes, Fsync: cfg.Fsync, Logger: cfg.Logger}
	for _, h := range cfg.Hubs {
		hubCfg.Hubs = append(hubCfg.Hubs, hub.HubConfig{Name: h.Name, Partitions: h.Partitions, ConsumerGroups: h.ConsumerGroups})
	}
	ns, err := hub.Open(hubCfg)
	if err != nil {
		return nil, fmt.Errorf("emulator: %w", err)
	}
	return &Server{
		cfg:       cfg,
		log:       cfg.Logger,
		ns:        ns,
		policies:  cfg.policies(),
		conns:     map[*conn]struct{}{},
		listeners: map[net.Listener]struct{}{},
	}, nil
}

// Start opens the hub store, listens on cfg.Addr (and cfg.TLS.Addr) and
// serves until Shutdown. The server is ready for connections when Start
// returns. ctx bounds start-up only; it is not kept. Start launches the
// accept loops, one goroutine group per connection and, with AdminAddr,
// the admin HTTP server; Shutdown stops and waits for all of them.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	s, err := New(cfg)
	if err != nil {
		return nil, err
	}
	cfg = s.cfg
	fail := func(err error) (*Server, error) {
		s.Shutdown(context.Background())
		return nil, err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", cfg.Addr)
	if err != nil {
		return fail(fmt.Errorf("emulator: listen on %s: %w", cfg.Addr, err))
	}
	s.ln = ln
	s.serveBackground(ln)
	var tlsCfg *tls.Config
	if cfg.TLS != nil || cfg.SchemaRegistryAddr != "" {
		// One certificate for AMQPS and the schema registries, so clients
		// trust one authority; without Config.TLS it is generated.
		opts := TLSOptions{CertOut: cfg.SchemaRegistryCertOut}
		if cfg.TLS != nil {
			opts = *cfg.TLS
		}
		tlsCfg, s.certPEM, err = opts.serverTLS(time.Now(), cfg.SchemaRegistryAddr)
		if err != nil {
			return fail(fmt.Errorf("emulator: %w", err))
		}
	}
	if cfg.TLS != nil {
		tln, err := lc.Listen(ctx, "tcp", cfg.TLS.Addr)
		if err != nil {
			return fail(fmt.Errorf("emulator: listen on %s: %w", cfg.TLS.Addr, err))
		}
		s.tlsLn = tls.NewListener(tln, tlsCfg)
		s.serveBackground(s.tlsLn)
	}
	if cfg.SchemaRegistryAddr != "" {
		if err := s.startSchemaRegistry(ctx, tlsCfg); err != nil {
			return fail(err)
		}
	}
	if cfg.AdminAddr != "" {
		if err := s.startAdmin(ctx); err != nil {
			return fail(err)
		}
	}
	listening := []any{"addr", s.Addr()}
	if s.tlsLn != nil {
		listening = append(listening, "amqps_addr", s.TLSAddr())
	}
	if s.registryLn != nil {
		listening = append(listening, "schema_registry_addr", s.SchemaRegistryAddr())
	}
	// Debug: the caller says it is ready in its own words (the emulator
	// command with its connection strings, ehsink run with the one its
	// connectors use), so an embedded emulator adds no second start line.
	s.log.Debug("emulator listening", append(listening, "hubs", len(cfg.Hubs))...)
	return s, nil
}

// serveBackground runs Serve(ln) on a goroutine the server's WaitGroup
// owns.
func (s *Server) serveBackground(ln net.Listener) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.Serve(ln); err != nil && !errors.Is(err, ErrServerClosed) {
			s.log.Error("accept failed", "addr", ln.Addr().String(), "err", err)
		}
	}()
}

// Addr returns the AMQP listen address (host:port): Start's plain
// listener, or the first listener given to Serve; "" before either.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// TLSAddr returns the AMQPS listen address (host:port), or "" without
// Config.TLS.
func (s *Server) TLSAddr() string {
	if s.tlsLn == nil {
		return ""
	}
	return s.tlsLn.Addr().String()
}

// CertificatePEM returns the PEM certificate AMQPS and schema registry
// clients should trust (see TLSOptions.CertOut), or nil without Config.TLS
// and Config.SchemaRegistryAddr.
func (s *Server) CertificatePEM() []byte { return s.certPEM }

// AdminAddr returns the admin HTTP address, or "" without an admin server.
func (s *Server) AdminAddr() string {
	if s.adminLn == nil {
		return ""
	}
	return s.adminLn.Addr().String()
}

// ConnectionString returns an SDK connection string for the named hub on
// the plain listener, in the SDK's emulator mode. With keys it uses the
// first full-rights namespace key in name order (so tokens verify and
// every operation is allowed); otherwise placeholder credentials.
func (s *Server) ConnectionString(hubName string) string {
	name, key := s.defaultKey()
	return fmt.Sprintf("Endpoint=sb://%s;SharedAccessKeyName=%s;SharedAccessKey=%s;EntityPath=%s;UseDevelopmentEmulator=true",
		s.Addr(), name, key, hubName)
}

// TLSConnectionString returns a connection string for the named hub on
// the AMQPS listener, without UseDevelopmentEmulator: what SDKs that
// always use TLS are given, along with CertificatePEM to trust. It is ""
// without Config.TLS.
func (s *Server) TLSConnectionString(hubName string) string {
	if s.tlsLn == nil {
		return ""
	}
	name, key := s.defaultKey()
	return fmt.Sprintf("Endpoint=sb://%s/;SharedAccessKeyName=%s;SharedAccessKey=%s;EntityPath=%s",
		s.TLSAddr(), name, key, hubName)
}

// defaultKey picks the key connection strings carry.
func (s *Server) defaultKey() (name, key string) {
	if len(s.policies) == 0 {
		return "k", "v"
	}
	names := slices.Sorted(maps.Keys(s.policies))
	for _, n := range names {
		if p := s.policies[n]; p.EventHub == "" && p.Rights == allRights {
			return n, p.Key.Reveal()
		}
	}
	return names[0], s.policies[names[0]].Key.Reveal()
}

// Serve accepts AMQP connections on ln until Shutdown, then returns nil;
// it returns the accept error if ln fails first, and ErrServerClosed if
// called after Shutdown. It closes ln before returning. A TLS listener
// (tls.NewListener) serves AMQPS. Connections it accepted keep running
// until they end or Shutdown, which waits for them. Serve may be called
// for several listeners at once.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	s.listeners[ln] = struct{}{}
	if s.ln == nil {
		s.ln = ln
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, ln)
		s.mu.Unlock()
		ln.Close()
	}()
	for {
		nc, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return nil
			}
			return fmt.Errorf("emulator: accept on %s: %w", ln.Addr(), err)
		}
		s.accepted.Add(1)
		c := newConn(s, nc)
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			nc.Close()
			return nil
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			c.serve()
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
		}()
	}
}

// Shutdown stops accepting, closes every connection with
// amqp:connection:forced, waits for all goroutines (or ctx) and closes the
// hub store. It is idempotent; later calls return the first result.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutdownOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		conns := make([]*conn, 0, len(s.conns))
		for c := range s.conns {
			conns = append(conns, c)
		}
		lns := slices.Collect(maps.Keys(s.listeners))
		s.mu.Unlock()
		for _, ln := range lns {
			ln.Close()
		}
		if s.admin != nil {
			s.admin.Close()
		}
		if s.registry != nil {
			// Shutdown, not Close: it waits for requests in flight, so no
			// handler touches the schema store after it is closed below.
			if err := s.registry.Shutdown(ctx); err != nil {
				s.registry.Close()
			}
		}
		for _, c := range conns {
			c.teardown(closeShutdown, forcedError("the emulator is shutting down"))
		}
		done := make(chan struct{})
		go func() { s.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			for _, c := range conns {
				c.nc.Close()
			}
			<-done
			s.shutdownErr = fmt.Errorf("emulator: shutdown: %w", ctx.Err())
		}
		if err := s.ns.Close(); err != nil && s.shutdownErr == nil {
			s.shutdownErr = fmt.Errorf("emulator: close hub store: %w", err)
		}
		if s.schemas != nil {
			if err := s.schemas.Close(); err != nil && s.shutdownErr == nil {
				s.shutdownErr = fmt.Errorf("emulator: %w", err)
			}
		}
	})
	return s.shutdownErr
}

// ForceDetach detaches every receiver of the partition with
// amqp:link:detach-forced; the SDK recovers the link. It returns how many
// receivers were detached.
func (s *Server) ForceDetach(hubName, partition string) int {
	return s.ns.ForceDetach(hubName, partition)
}

// AddPartitions grows event hub hubName to count partitions while the
// server runs, as Event Hubs Premium and Dedicated allow: clients see the
// new partitions in the hub's properties at their next read. A count below
// the current one is refused (a hub never shrinks).
func (s *Server) AddPartitions(hubName string, count int) error {
	h, err := s.ns.Hub(hubName)
	if err != nil {
		return err
	}
	return h.AddPartitions(count)
}

// ServerBusy makes sends fail with com.microsoft:server-busy for d
// (zero or negative ends it).
func (s *Server) ServerBusy(d time.Duration) {
	if d <= 0 {
		s.ns.SetServerBusy(time.Time{})
		return
	}
	s.ns.SetServerBusy(time.Now().Add(d))
}

// SetLatency adds d before every send is stored and every management or
// CBS reply (zero removes it).
func (s *Server) SetLatency(d time.Duration) { s.latency.Store(int64(max(d, 0))) }

// FailPartitionProperties makes the next n partition-properties reads of
// $management answer 500 (internal error), as a service that drops the
// call would; zero or less ends it.
func (s *Server) FailPartitionProperties(n int) { s.failProps.Store(int64(max(n, 0))) }

// DropConnections closes every client socket at once, without a close
// frame, as a network failure would. It returns how many were dropped.
func (s *Server) DropConnections() int {
	s.mu.Lock()
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.drop()
	}
	return len(conns)
}

// maxProtoErrs bounds the protocol errors a Server keeps for
// ProtocolErrors.
const maxProtoErrs = 16

func (s *Server) noteProtocolError(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.protoCount++
	if len(s.protoErrs) < maxProtoErrs {
		s.protoErrs = append(s.protoErrs, err.Error())
	}
}

// ProtocolErrors returns how many connections the server closed because
// the client broke the protocol, and the first few errors. A conforming
// client never causes one; tests use it to catch emulator bugs that real
// clients would see as dropped connections.
func (s *Server) ProtocolErrors() (int, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.protoCount, slices.Clone(s.protoErrs)
}

// connsAccepted returns how many connections were accepted since Start.
func (s *Server) connsAccepted() int64 { return s.accepted.Load() }

// connDrops returns how many connections ended on I/O errors or idleness
// (not on client close, protocol error, shutdown or DropConnections).
func (s *Server) connDrops() int64 { return s.dropped.Load() }

// delay waits for the injected latency or until ctx ends.
func (s *Server) delay(ctx context.Context) {
	d := time.Duration(s.latency.Load())
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
