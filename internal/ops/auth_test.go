package ops_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ehsink/ehsink/cli/devenv"
	"github.com/ehsink/ehsink/emulator"
	"github.com/ehsink/ehsink/internal/connector"
	"github.com/ehsink/ehsink/internal/ops"
	"github.com/ehsink/ehsink/internal/secret"
	"github.com/ehsink/ehsink/internal/testenv"
	_ "github.com/ehsink/ehsink/sinks/postgres"
	_ "github.com/ehsink/ehsink/sinks/stdout"
)

// controlName is the connector runControl runs.
const controlName = "steered"

// runControl runs one connector (the emulator to stdout; no event is sent,
// so nothing is printed) and returns its Control once the connector is
// registered there, so that pause, resume and restart reach it.
func runControl(t *testing.T, ctx context.Context) *connector.Control {
	t.Helper()
	return runConnector(t, ctx, "{type: stdout}")
}

// runConnector is runControl with the connector's sink block.
func runConnector(t *testing.T, ctx context.Context, sink string) *connector.Control {
	t.Helper()
	emu, err := emulator.Start(ctx, emulator.Config{Hubs: []emulator.HubConfig{{Name: "orders", Partitions: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	cfgPath := filepath.Join(work, "connectors.yaml")
	if err := os.WriteFile(cfgPath, []byte(`
connectors:
  - name: `+controlName+`
    source:
      connection: "`+emu.ConnectionString("orders")+`"
      load_balancing: {strategy: greedy, update_interval: 1s, ownership_expiration: 4s}
    checkpoint: {file: {dir: `+filepath.Join(work, "checkpoints")+`}}
    sink: `+sink+`
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := connector.Load(cfgPath, connector.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	control := connector.NewControl()
	runCtx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = connector.Run(runCtx, cfg, connector.RunOptions{Control: control, DevEnv: devenv.New(), Logger: slog.New(slog.DiscardHandler)})
	}()
	t.Cleanup(func() {
		stop()
		wg.Wait()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = emu.Shutdown(sctx)
	})
	eventually(t, ctx, "the connector registered", func() bool {
		_, err := control.Status(controlName)
		return err == nil
	})
	return control
}

// api is an operations server on a real listener.
type api struct {
	base string // http://127.0.0.1:PORT, even when listening on 0.0.0.0
	logs *testenv.LogBuffer
}

func serve(t *testing.T, control *connector.Control, addr string, token secret.String) *api {
	t.Helper()
	logs := &testenv.LogBuffer{}
	srv, err := ops.Serve(addr, ops.Options{Control: control, Token: token, Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	_, port, _ := net.SplitHostPort(srv.Addr().String())
	return &api{base: "http://127.0.0.1:" + port, logs: logs}
}

// request is one HTTP request to the API; header values set headers, and
// a "Host" entry sets the request's Host.
type request struct {
	method, path string
	header       map[string]string
	body         string
}

func (a *api) do(t *testing.T, rq request) (int, string) {
	t.Helper()
	req, err := http.NewRequest(rq.method, a.base+rq.path, strings.NewReader(rq.body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range rq.header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

func post(path string, header map[string]string) request {
	return request{method: "POST", path: path, header: header}
}

const pausePath = "/v1/connectors/" + controlName + "/pause"

// expect checks a status code and that the body contains every want.
func expect(t *testing.T, what string, code int, body string, wantCode int, want ...string) {
	t.Helper()
	if code != wantCode {
		t.Errorf("%s: %d %s, want %d", what, code, body, wantCode)
		return
	}
	for _, w := range want {
		if !strings.Contains(body, w) {
			t.Errorf("%s: body %s, want it to contain %q", what, body, w)
		}
	}
}

// openRoutesServed checks that the probes, /metrics and the read-only
// status answer without a token: kubelet and Prometheus carry none.
func openRoutesServed(t *testing.T, a *api) {
	t.Helper()
	for _, p := range []string{"/healthz", "/readyz", "/metrics", "/v1/connectors", "/v1/connectors/" + controlName} {
		code, body := a.do(t, request{method: "GET", path: p})
		// /readyz may be 503 while the connector starts; it must not be
		// refused.
		if code == http.StatusUnauthorized || code == http.StatusForbidden || code == http.StatusNotFound ||
			(p != "/readyz" && code != http.StatusOK) {
			t.Errorf("GET %s without a token: %d %s, want it served", p, code, body)
		}
	}
}

// TestControlNeedsTheToken: with a token configured, a changing route
// refuses a request without it (401) or with a wrong one (401) and serves
// the right one, on a loopback listener as on any other; the open routes
// stay open.
func TestControlNeedsTheToken(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	control := runControl(t, ctx)
	const token = "s3cret-token"
	for _, addr := range []string{"127.0.0.1:0", "0.0.0.0:0"} {
		t.Run(addr, func(t *testing.T) {
			a := serve(t, control, addr, token)
			code, body := a.do(t, post(pausePath, nil))
			expect(t, "no token", code, body, http.StatusUnauthorized, "Authorization: Bearer")
			code, body = a.do(t, post(pausePath, map[string]string{"Authorization": "Bearer wrong"}))
			expect(t, "wrong token", code, body, http.StatusUnauthorized, "wrong bearer token")
			code, body = a.do(t, post(pausePath, map[string]string{"Authorization": "Bearer " + token + "x"}))
			expect(t, "token with a suffix", code, body, http.StatusUnauthorized)
			code, body = a.do(t, post(pausePath, map[string]string{"Authorization": "Basic " + token}))
			expect(t, "token in another scheme", code, body, http.StatusUnauthorized)
			if st, _ := control.Status(controlName); st.State == connector.StatePaused {
				t.Fatalf("a refused pause paused the connector: %+v", st)
			}
			code, body = a.do(t, post(pausePath, map[string]string{"Authorization": "Bearer " + token}))
			expect(t, "right token", code, body, http.StatusOK, `"name": "`+controlName+`"`)
			// The scheme is case-insensitive.
			code, body = a.do(t, post("/v1/connectors/"+controlName+"/resume", map[string]string{"Authorization": "bearer " + token}))
			expect(t, "resume with the right token", code, body, http.StatusOK)
			openRoutesServed(t, a)
			if strings.Contains(a.logs.String(), token) {
				t.Errorf("the token is in the logs:\n%s", a.logs.String())
			}
		})
	}
}

// TestNoTokenNonLoopbackRefuses: with no token, a listener on all
// interfaces refuses every changing route with a 403 that says why and
// what to set, says so at start, and keeps the open routes open.
func TestNoTokenNonLoopbackRefuses(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	control := runControl(t, ctx)
	a := serve(t, control, "0.0.0.0:0", "")
	for _, rt := range ops.Routes(false) {
		if rt.Method == "GET" {
			continue
		}
		path := strings.ReplaceAll(rt.Path, "{name}", controlName)
		code, body := a.do(t, post(path, nil))
		expect(t, "POST "+path, code, body, http.StatusForbidden, "no token is configured", "not loopback", "http.token")
	}
	if st, _ := control.Status(controlName); st.State == connector.StatePaused {
		t.Fatalf("a refused pause paused the connector: %+v", st)
	}
	if logs := a.logs.String(); !strings.Contains(logs, "refused with 403") {
		t.Errorf("no start line saying that changing routes are refused:\n%s", logs)
	}
	openRoutesServed(t, a)
}

// TestNoTokenLoopback: with no token, a loopback listener serves the
// changing routes to local clients, but not to a request whose Host is
// another name, as a page whose name was rebound to 127.0.0.1 sends.
func TestNoTokenLoopback(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	control := runControl(t, ctx)
	a := serve(t, control, "127.0.0.1:0", "")
	code, body := a.do(t, post(pausePath, map[string]string{"Host": "evil.example"}))
	expect(t, "forged Host", code, body, http.StatusForbidden, "not a loopback name")
	code, body = a.do(t, post(pausePath, map[string]string{"Host": "evil.example", "Origin": "http://evil.example", "Sec-Fetch-Site": "same-origin"}))
	expect(t, "rebound page, same-origin for the browser", code, body, http.StatusForbidden, "not a loopback name")
	code, body = a.do(t, post(pausePath, map[string]string{"Host": "localhost"}))
	expect(t, "Host localhost", code, body, http.StatusOK)
	code, body = a.do(t, post(pausePath, nil))
	expect(t, "Host 127.0.0.1", code, body, http.StatusOK)
	openRoutesServed(t, a)
}

// TestCrossSiteRefused: a browser's cross-site POST (the simple request a
// page can send without a preflight) is refused on every changing route,
// with or without a token configured; a same-origin POST and a client
// that sends no browser headers (curl) are served.
func TestCrossSiteRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	control := runControl(t, ctx)
	const token = "s3cret-token"
	for name, tok := range map[string]secret.String{"no token": "", "token": token} {
		t.Run(name, func(t *testing.T) {
			a := serve(t, control, "127.0.0.1:0", tok)
			auth := func(h map[string]string) map[string]string {
				if tok != "" {
					h["Authorization"] = "Bearer " + token
				}
				return h
			}
			for _, rt := range ops.Routes(true) {
				if rt.Method == "GET" {
					continue
				}
				path := strings.ReplaceAll(rt.Path, "{name}", controlName)
				for what, h := range map[string]map[string]string{
					"cross-site":          {"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site", "Content-Type": "text/plain"},
					"cross-site, no Sec-": {"Origin": "http://evil.example", "Content-Type": "text/plain"},
					"forged Host":         {"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site", "Content-Type": "text/plain", "Host": "evil.example"},
				} {
					code, body := a.do(t, post(path, auth(h)))
					expect(t, what+" POST "+path, code, body, http.StatusForbidden, "cross-origin")
				}
			}
			if st, _ := control.Status(controlName); st.State == connector.StatePaused {
				t.Fatalf("a cross-site pause paused the connector: %+v", st)
			}
			host := strings.TrimPrefix(a.base, "http://")
			code, body := a.do(t, post(pausePath, auth(map[string]string{"Origin": a.base, "Sec-Fetch-Site": "same-origin", "Content-Type": "text/plain", "Host": host})))
			expect(t, "same-origin POST", code, body, http.StatusOK)
			code, body = a.do(t, post("/v1/connectors/"+controlName+"/resume", auth(map[string]string{})))
			expect(t, "POST without browser headers", code, body, http.StatusOK)
		})
	}
}

// TestControlBody: a control POST takes no body or {}; anything else is a
// 400 and changes nothing.
func TestControlBody(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	control := runControl(t, ctx)
	a := serve(t, control, "127.0.0.1:0", "")
	for _, body := range []string{`{"paused": tru`, `not json`, `[]`, `{"reason": "x"}`, `{} {}`} {
		code, got := a.do(t, request{method: "POST", path: pausePath, body: body, header: map[string]string{"Content-Type": "application/json"}})
		expect(t, "body "+body, code, got, http.StatusBadRequest, "request body")
	}
	if st, _ := control.Status(controlName); st.State == connector.StatePaused {
		t.Fatalf("a pause with a bad body paused the connector: %+v", st)
	}
	for _, body := range []string{"", "{}", " {}\n"} {
		code, got := a.do(t, request{method: "POST", path: pausePath, body: body})
		expect(t, "body "+body, code, got, http.StatusOK)
	}
}

// TestAuditLine: each control request, served or refused, gets one log
// line with its route, connector, the caller's address and the result;
// never the token.
func TestAuditLine(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	control := runControl(t, ctx)
	const token = "s3cret-token"
	a := serve(t, control, "127.0.0.1:0", token)
	a.do(t, post(pausePath, map[string]string{"Authorization": "Bearer wrong"}))
	a.do(t, post(pausePath, map[string]string{"Authorization": "Bearer " + token}))
	a.do(t, request{method: "GET", path: "/v1/connectors"})

	type line struct {
		Msg, Route, Connector, Remote, Result string
		Status                                int
	}
	var audits []line
	for _, l := range strings.Split(strings.TrimSpace(a.logs.String()), "\n") {
		var e line
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("log line %s: %v", l, err)
		}
		if e.Msg == "operations API audit" {
			audits = append(audits, e)
		}
	}
	if len(audits) != 2 {
		t.Fatalf("%d audit lines, want 2 (one per control request, none for a GET):\n%s", len(audits), a.logs.String())
	}
	for i, want := range []struct {
		status int
		result string
	}{{http.StatusUnauthorized, "wrong bearer token"}, {http.StatusOK, "ok"}} {
		got := audits[i]
		if got.Route != "POST /v1/connectors/{name}/pause" || got.Connector != controlName ||
			!strings.HasPrefix(got.Remote, "127.0.0.1:") || got.Status != want.status || got.Result != want.result {
			t.Errorf("audit line %d: %+v, want route POST /v1/connectors/{name}/pause, connector %s, remote 127.0.0.1:*, status %d, result %q",
				i, got, controlName, want.status, want.result)
		}
	}
	if strings.Contains(a.logs.String(), token) {
		t.Errorf("the token is in the logs:\n%s", a.logs.String())
	}
}

// TestReadyzSinkDownAtStart: with only the sink down at start, /readyz
// names the sink, and says the source was not tried (the source is dialled
// once the sink answers) rather than "not reached".
func TestReadyzSinkDownAtStart(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close() // nothing listens there now: the sink is down
	control := runConnector(t, ctx, `{type: postgres, dsn: "postgres://u:p@`+dead+`/db?connect_timeout=1", table: t, columns: {id: {from: $.id, type: text}}}`)
	a := serve(t, control, "127.0.0.1:0", "")
	var body string
	eventually(t, ctx, "/readyz naming the sink", func() bool {
		var code int
		code, body = a.do(t, request{method: "GET", path: "/readyz"})
		return code == http.StatusServiceUnavailable && strings.Contains(body, "sink not reached")
	})
	var rd struct {
		NotReady []struct{ Connector, Reason string } `json:"not_ready"`
	}
	if err := json.Unmarshal([]byte(body), &rd); err != nil || len(rd.NotReady) != 1 {
		t.Fatalf("/readyz body %s: %v", body, err)
	}
	reason := rd.NotReady[0].Reason
	if strings.Contains(reason, "source not reached") || !strings.Contains(reason, "source not tried yet") {
		t.Errorf("/readyz reason %q: the source was never tried; want it said so, and the sink named", reason)
	}
}
