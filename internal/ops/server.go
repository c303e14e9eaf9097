package ops

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ehsink/ehsink/internal/connector"
	"github.com/ehsink/ehsink/internal/deadletters"
	"github.com/ehsink/ehsink/internal/secret"
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
		{"POST", "/v1/connectors/{name}/deadletters/replay", "replay the connector's dead letters through its running sink, as `ehsink deadletters replay`"},
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
	// Token, when set, is the bearer token the routes that change
	// something (every POST) require. When empty, those routes are served
	// only on a loopback listener, to requests whose Host names loopback
	// (so that a DNS-rebound page cannot reach them), and refused with 403
	// on any other listener.
	Token secret.String
	// Logger receives the server's logs and an audit line per control
	// request. If nil, logs are discarded.
	Logger *slog.Logger
}

// Server is the operations HTTP server. Start it with [Serve]; it is safe
// for concurrent use.
type Server struct {
	opts     Options
	log      *slog.Logger
	srv      *http.Server
	ln       net.Listener
	loopback bool // ln listens on a loopback address only
	token    [sha256.Size]byte
	done     chan struct{}
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
	s := &Server{opts: opts, log: log, ln: ln, loopback: isLoopback(ln.Addr()), done: make(chan struct{})}
	// Hashing both sides gives ConstantTimeCompare inputs of one length,
	// so the comparison does not reveal the token's length either.
	s.token = sha256.Sum256([]byte(opts.Token.Reveal()))
	s.srv = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("operations HTTP server", "err", err)
		}
	}()
	log.Info("serving the operations API", "addr", "http://"+ln.Addr().String(), "pprof", opts.Pprof)
	switch {
	case opts.Token != "":
		log.Info("operations API: pause, resume, restart and replay require the bearer token of http.token or http.token_file")
	case s.loopback:
		log.Info("operations API: no token set (http.token or http.token_file); pause, resume, restart and replay are served without one because the listener is loopback")
	default:
		log.Warn("operations API: no token set (http.token or http.token_file) and the listener is not loopback: pause, resume, restart and replay are refused with 403; probes, /metrics and status stay open", "addr", ln.Addr().String())
	}
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
		"/metrics":                                 promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}).ServeHTTP,
		"/healthz":                                 s.healthz,
		"/readyz":                                  s.readyz,
		"/v1/connectors":                           s.list,
		"/v1/connectors/{name}":                    s.get,
		"/v1/connectors/{name}/pause":              s.control((*connector.Control).Pause),
		"/v1/connectors/{name}/resume":             s.control((*connector.Control).Resume),
		"/v1/connectors/{name}/restart":            s.control((*connector.Control).Restart),
		"/v1/connectors/{name}/deadletters/replay": s.guard(s.replay),
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

// control serves a POST that steers one connector: its body, if any,
// must be an empty JSON object; then do runs and the answer is the
// connector's status after the change.
func (s *Server) control(do func(*connector.Control, string) error) http.HandlerFunc {
	return s.guard(func(w http.ResponseWriter, r *http.Request) {
		if err := checkBody(r); err != nil {
			writeMessage(w, http.StatusBadRequest, err.Error())
			return
		}
		name := r.PathValue("name")
		if err := do(s.opts.Control, name); err != nil {
			writeError(w, err)
			return
		}
		st, err := s.opts.Control.Status(name)
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, st)
	})
}

// guard serves a POST that changes something. In order: the request must
// not come from another site's page (cross-origin protection), must be
// authorized; then serve answers it. Each request, refused or not, gets
// one audit line.
func (s *Server) guard(serve http.HandlerFunc) http.HandlerFunc {
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeMessage(w, http.StatusForbidden, "cross-origin request refused: a browser page of another site may not change a connector")
	}))
	steer := cop.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.authorize(w, r) {
			serve(w, r)
		}
	}))
	return func(w http.ResponseWriter, r *http.Request) {
		// The answer is held until the audit line is written, so that a
		// caller that got its answer finds the line in the log.
		rec := &recorder{header: w.Header()}
		steer.ServeHTTP(rec, r)
		if rec.code == 0 {
			rec.code = http.StatusOK
		}
		result := "ok"
		if rec.code != http.StatusOK {
			var e errorBody
			_ = json.Unmarshal(rec.body.Bytes(), &e)
			result = e.Error
		}
		level := slog.LevelInfo
		if rec.code != http.StatusOK {
			level = slog.LevelWarn
		}
		s.log.Log(r.Context(), level, "operations API audit", "route", r.Pattern,
			"connector", r.PathValue("name"), "remote", r.RemoteAddr, "status", rec.code, "result", result)
		w.WriteHeader(rec.code)
		_, _ = w.Write(rec.body.Bytes())
	}
}

// authorize reports whether r may change something, and answers it when
// not: with a token configured, r must carry it; without one, the listener
// must be loopback and r's Host a loopback name.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) bool {
	if s.opts.Token != "" {
		// The scheme is case-insensitive (RFC 9110, 11.1).
		scheme, got, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		ok := strings.EqualFold(scheme, "Bearer")
		sum := sha256.Sum256([]byte(strings.TrimSpace(got)))
		if ok && subtle.ConstantTimeCompare(sum[:], s.token[:]) == 1 {
			return true
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="ehsink operations"`)
		if !ok {
			writeMessage(w, http.StatusUnauthorized, "this route needs the header Authorization: Bearer TOKEN, with the token of http.token or http.token_file")
		} else {
			writeMessage(w, http.StatusUnauthorized, "wrong bearer token")
		}
		return false
	}
	if !s.loopback {
		writeMessage(w, http.StatusForbidden, fmt.Sprintf("no token is configured and the listener %s is not loopback: "+
			"set http.token or http.token_file to use this route, or listen on 127.0.0.1", s.ln.Addr()))
		return false
	}
	// A page whose name was rebound to 127.0.0.1 reaches a loopback
	// listener as same-origin; its requests carry its own name as Host.
	if !loopbackHost(r.Host) {
		writeMessage(w, http.StatusForbidden, fmt.Sprintf("no token is configured and Host %q is not a loopback name: "+
			"without a token, only requests to localhost or a loopback address may change a connector", r.Host))
		return false
	}
	return true
}

// checkBody accepts a control request with no body or an empty JSON
// object: the routes take no parameters, and a body that says something
// else was meant for another route or version.
func checkBody(r *http.Request) error {
	var v struct{}
	return decodeBody(r, &v, "no body or {}")
}

// decodeBody decodes a POST's JSON body, if any, into v, refusing unknown
// fields (want says what the route takes).
func decodeBody(r *http.Request, v any, want string) error {
	b, err := io.ReadAll(io.LimitReader(r.Body, 1<<16))
	if err != nil {
		return fmt.Errorf("read request body: %w", err)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("request body: want %s: %w", want, err)
	}
	if dec.More() {
		return fmt.Errorf("request body: want %s: data after the JSON object", want)
	}
	return nil
}

// isLoopback reports whether a listener's address is a loopback one
// (127.0.0.0/8 or ::1); 0.0.0.0 and :: are not.
func isLoopback(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// loopbackHost reports whether a request's Host names loopback:
// localhost or a loopback address, with or without a port.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// recorder holds a response (its status and body; headers go to the
// real writer's map) until the audit line is written.
type recorder struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return r.body.Write(b)
}

type errorBody struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	switch {
	case errors.Is(err, connector.ErrUnknownConnector):
		code = http.StatusNotFound
	case errors.Is(err, connector.ErrConnectorState):
		code = http.StatusConflict
	case errors.Is(err, deadletters.ErrReplayUnsupported):
		code = http.StatusNotImplemented
	}
	writeMessage(w, code, err.Error())
}

func writeMessage(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, errorBody{msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
