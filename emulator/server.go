package emulator

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ehsink/ehsink/emulator/hub"
)

// Server is a running emulator. Its methods are safe for concurrent use.
type Server struct {
	cfg     Config
	log     *slog.Logger
	ns      *hub.Namespace
	ln      net.Listener
	admin   *http.Server
	adminLn net.Listener

	latency  atomic.Int64 // nanoseconds added before each send and RPC
	dropped  atomic.Int64 // connections closed for I/O errors or idleness (for tests and logs)
	accepted atomic.Int64 // connections accepted since Start

	mu     sync.Mutex // guards conns, closed
	conns  map[*conn]struct{}
	closed bool

	wg           sync.WaitGroup // accept loop, connections, admin server
	shutdownOnce sync.Once
	shutdownErr  error
}

// Start opens the hub store, listens on cfg.Addr and serves until
// Shutdown. The server is ready for connections when Start returns. ctx
// bounds start-up only; it is not kept. Start launches the accept loop,
// one goroutine group per connection and, with AdminAddr, the admin HTTP
// server; Shutdown stops and waits for all of them.
func Start(ctx context.Context, cfg Config) (*Server, error) {
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
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", cfg.Addr)
	if err != nil {
		ns.Close()
		return nil, fmt.Errorf("emulator: listen on %s: %w", cfg.Addr, err)
	}
	s := &Server{cfg: cfg, log: cfg.Logger, ns: ns, ln: ln, conns: map[*conn]struct{}{}}
	if cfg.AdminAddr != "" {
		if err := s.startAdmin(ctx); err != nil {
			ln.Close()
			ns.Close()
			return nil, err
		}
	}
	s.wg.Add(1)
	go s.acceptLoop()
	s.log.Info("emulator listening", "addr", s.Addr(), "hubs", len(cfg.Hubs))
	return s, nil
}

// Addr returns the AMQP listen address (host:port).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// AdminAddr returns the admin HTTP address, or "" without an admin server.
func (s *Server) AdminAddr() string {
	if s.adminLn == nil {
		return ""
	}
	return s.adminLn.Addr().String()
}

// ConnectionString returns an SDK connection string for the named hub.
// With Config.Keys it uses the first key name in sorted order, so CBS
// tokens verify; otherwise placeholder credentials.
func (s *Server) ConnectionString(hubName string) string {
	name, key := "k", "v"
	if len(s.cfg.Keys) > 0 {
		names := make([]string, 0, len(s.cfg.Keys))
		for n := range s.cfg.Keys {
			names = append(names, n)
		}
		slices.Sort(names)
		name, key = names[0], s.cfg.Keys[names[0]].Reveal()
	}
	return fmt.Sprintf("Endpoint=sb://%s;SharedAccessKeyName=%s;SharedAccessKey=%s;EntityPath=%s;UseDevelopmentEmulator=true",
		s.Addr(), name, key, hubName)
}

func (s *Server) acceptLoop() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				s.log.Error("accept failed", "err", err)
			}
			return
		}
		s.accepted.Add(1)
		c := newConn(s, nc)
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			nc.Close()
			return
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
		s.mu.Unlock()
		s.ln.Close()
		if s.admin != nil {
			s.admin.Close()
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
	})
	return s.shutdownErr
}

// ForceDetach detaches every receiver of the partition with
// amqp:link:detach-forced; the SDK recovers the link. It returns how many
// receivers were detached.
func (s *Server) ForceDetach(hubName, partition string) int {
	return s.ns.ForceDetach(hubName, partition)
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

// checkPlain validates a SASL PLAIN response ("authzid\0user\0password")
// against Config.Keys; with no keys every login passes.
func (s *Server) checkPlain(resp []byte) bool {
	if len(s.cfg.Keys) == 0 {
		return true
	}
	parts := strings.Split(string(resp), "\x00")
	if len(parts) != 3 {
		return false
	}
	key, ok := s.cfg.Keys[parts[1]]
	return ok && hmac.Equal([]byte(key.Reveal()), []byte(parts[2]))
}

// checkToken verifies a SharedAccessSignature token against Config.Keys.
// It returns "" when the token is good, else the reason.
func (s *Server) checkToken(token string, now time.Time) string {
	if len(s.cfg.Keys) == 0 {
		return ""
	}
	const prefix = "SharedAccessSignature "
	if !strings.HasPrefix(token, prefix) {
		return "InvalidSignature: the token is not a SharedAccessSignature."
	}
	fields := map[string]string{}
	for _, kv := range strings.Split(strings.TrimPrefix(token, prefix), "&") {
		k, v, _ := strings.Cut(kv, "=")
		fields[k] = v
	}
	key, ok := s.cfg.Keys[fields["skn"]]
	if !ok {
		return fmt.Sprintf("InvalidSignature: unknown SharedAccessKeyName '%s'.", fields["skn"])
	}
	sig, err := urlUnescape(fields["sig"])
	if err != nil {
		return "InvalidSignature: the signature is not URL-encoded."
	}
	mac := hmac.New(sha256.New, []byte(key.Reveal()))
	mac.Write([]byte(fields["sr"] + "\n" + fields["se"]))
	if !hmac.Equal([]byte(base64.StdEncoding.EncodeToString(mac.Sum(nil))), []byte(sig)) {
		return "InvalidSignature: The token has an invalid signature."
	}
	var se int64
	if _, err := fmt.Sscanf(fields["se"], "%d", &se); err != nil {
		return "InvalidSignature: the expiry is not a number."
	}
	if se != 0 && now.Unix() > se {
		return fmt.Sprintf("ExpiredToken: The token is expired. Expiration time: '%s'.", time.Unix(se, 0).UTC().Format(time.RFC3339))
	}
	return ""
}
