package ops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ehsink/ehsink/internal/connector"
)

// DefaultAddr is the listen address when none is configured: loopback only.
const DefaultAddr = "127.0.0.1:9464"

// Route is one route of the API.
type Route struct {
	Method  string // GET or POST
	Path    string // as given to http.ServeMux, with {name} for the connector
	Summary string // one line for the API listing
}

// Routes returns every route the server can serve, in the order docs/operations.md
// lists them. pprof adds /debug/pprof/.
func Routes(pprof bool) []Route {
	rs := []Route{
		{"GET", "/metrics", "Prometheus metrics"},
		{"GET", "/healthz", "liveness: 200 while the process serves and no connector failed, else 503 naming the failed ones"},
		{"GET", "/readyz", "readiness: 200 when every connector reached its source and its sink, else 503 with the reasons"},
		{"GET", "/v1/connectors", "status of every connector"},
		{"GET", "/v1/connectors/{name}", "status of one connector"},
		{"POST", "/v1/connectors/{name}/pause", "pause: flush and checkpoint what is held, stop receiving, keep the leases"},
		{"POST", "/v1/connectors/{name}/resume", "resume a paused connector"},
		{"POST", "/v1/connectors/{name}/restart", "rebuild the connector's sink and source"},
	}
	if pprof {
		rs = append(rs, Route{"GET", "/debug/pprof/", "Go profiles (only with http.pprof: true)"})
	}
	return rs
}

// Options configure a [Server].
type Options struct {
	// Control is the running connectors' control. Required.
	Control *connector.Control
	// Gatherer serves /metrics. If nil, /metrics serves nothing.
	Gatherer prometheus.Gatherer
	// Pprof serves /debug/pprof/.
	Pprof bool
	// Logger receives the server's logs. If nil, logs are discarded.
	Logger *slog.Logger
}

// Server is the operations HTTP server. Start it with [Serve]; it is safe
// for concurrent use.
type Server struct {
	opts Options
	log  *slog.Logger
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
}

// Serve listens on addr (if empty, [DefaultAddr]) and serves the API in a
// goroutine of its own until [Server.Shutdown].
func Serve(addr string, opts Options) (*Server, error) {
	if opts.Control == nil {
		return nil, errors.New("ops: Options.Control is required")
	}
	if addr == "" {
		addr = DefaultAddr
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("ops: listen: %w", err)
	}
	s := &Server{opts: opts, log: log, ln: ln, done: make(chan struct{})}
	s.srv = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("operations HTTP server", "err", err)
		}
	}()
	log.Info("serving the operations API", "addr", "http://"+ln.Addr().String(), "pprof", opts.Pprof)
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Shutdown stops accepting requests, waits for those in flight within ctx
// and for the serving goroutine. It is idempotent.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	<-s.done
	return err
}

// Handler returns the API's handler.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	gatherer := s.opts.Gatherer
	if gatherer == nil {
		gatherer = prometheus.NewRegistry()
	}
	handlers := map[string]http.HandlerFunc{
		"/metrics":                      promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}).ServeHTTP,
		"/healthz":                      s.healthz,
		"/readyz":                       s.readyz,
		"/v1/connectors":                s.list,
		"/v1/connectors/{name}":         s.get,
		"/v1/connectors/{name}/pause":   s.action((*connector.Control).Pause),
		"/v1/connectors/{name}/resume":  s.action((*connector.Control).Resume),
		"/v1/connectors/{name}/restart": s.action((*connector.Control).Restart),
	}
	for _, r := range Routes(s.opts.Pprof) {
		if r.Path == "/debug/pprof/" {
			mux.HandleFunc("GET /debug/pprof/", pprof.Index)
			mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
			mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
			mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
			mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
			continue
		}
		mux.HandleFunc(r.Method+" "+r.Path, handlers[r.Path])
	}
	return mux
}

// healthz answers 200 while the process serves and no connector failed
// for good. Connectors are isolated, so the process keeps serving the
// others after one failed; the 503 lets a supervisor restart it, the one
// way to start a failed connector again.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	var failed []string
	for _, st := range s.opts.Control.Statuses() {
		if st.State == connector.StateFailed {
			failed = append(failed, st.Name)
		}
	}
	if len(failed) > 0 {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, "failed connectors: %s\n", strings.Join(failed, ", "))
		return
	}
	fmt.Fprintln(w, "ok")
}

// readiness is the body of /readyz.
type readiness struct {
	Ready    bool            `json:"ready"`
	NotReady []notReadyEntry `json:"not_ready,omitempty"`
}

type notReadyEntry struct {
	Connector string `json:"connector"`
	Reason    string `json:"reason"`
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	body := readiness{Ready: true}
	for _, st := range s.opts.Control.Statuses() {
		if reason := st.NotReady(); reason != "" {
			body.Ready = false
			body.NotReady = append(body.NotReady, notReadyEntry{Connector: st.Name, Reason: reason})
		}
	}
	code := http.StatusOK
	if !body.Ready {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, body)
}

func (s *Server) list(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, struct {
		Connectors []connector.ConnectorStatus `json:"connectors"`
	}{s.opts.Control.Statuses()})
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	st, err := s.opts.Control.Status(r.PathValue("name"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// action serves a POST that steers one connector and answers with its
// status after the change.
func (s *Server) action(do func(*connector.Control, string) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		if err := do(s.opts.Control, name); err != nil {
			writeError(w, err)
			return
		}
		s.log.Info("operations API", "request", r.Method+" "+r.URL.Path, "remote", r.RemoteAddr)
		st, err := s.opts.Control.Status(name)
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, st)
	}
}

func writeError(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	switch {
	case errors.Is(err, connector.ErrUnknownConnector):
		code = http.StatusNotFound
	case errors.Is(err, connector.ErrConnectorState):
		code = http.StatusConflict
	}
	writeJSON(w, code, struct {
		Error string `json:"error"`
	}{err.Error()})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
