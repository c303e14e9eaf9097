package schemaregistry

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ehsink/ehsink/internal/avro"
	"github.com/ehsink/ehsink/internal/secret"
)

const userV1 = `{"type":"record","name":"User","fields":[{"name":"id","type":"long"},{"name":"name","type":"string"}]}`

// fakeRegistry serves the contract's Azure and Confluent routes from a
// map, counts the gets, and fails while down is set.
type fakeRegistry struct {
	mu      sync.Mutex
	schemas map[string]string
	gets    atomic.Int64
	down    atomic.Bool
	key     string // SAS key of policy "reg"; "" = no auth
	user    string // basic auth "user:password" of the Confluent routes
}

func (f *fakeRegistry) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.down.Load() {
		http.Error(w, `{"error":{"code":"ServiceUnavailable","message":"down"}}`, http.StatusServiceUnavailable)
		return
	}
	var id string
	switch {
	case strings.HasPrefix(r.URL.Path, "/$schemaGroups/$schemas/"):
		if r.URL.Query().Get("api-version") == "" {
			http.Error(w, "no api-version", http.StatusBadRequest)
			return
		}
		if f.key != "" && !f.validSAS(r) {
			http.Error(w, `{"error":{"code":"Unauthorized","message":"bad token"}}`, http.StatusUnauthorized)
			return
		}
		id = strings.TrimPrefix(r.URL.Path, "/$schemaGroups/$schemas/")
	case strings.HasPrefix(r.URL.Path, "/schemas/ids/"):
		if u, p, _ := r.BasicAuth(); f.user != "" && u+":"+p != f.user {
			http.Error(w, `{"error_code":401,"message":"unauthorized"}`, http.StatusUnauthorized)
			return
		}
		id = "c" + strings.TrimPrefix(r.URL.Path, "/schemas/ids/")
	default:
		http.NotFound(w, r)
		return
	}
	f.gets.Add(1)
	f.mu.Lock()
	s, ok := f.schemas[id]
	f.mu.Unlock()
	if !ok {
		http.Error(w, `{"error":{"code":"ItemNotFound","message":"no such schema"}}`, http.StatusNotFound)
		return
	}
	if strings.HasPrefix(id, "c") {
		_ = json.NewEncoder(w).Encode(map[string]string{"schema": s})
		return
	}
	_, _ = w.Write([]byte(s))
}

// validSAS checks the token as the service does, independently of SASToken.
func (f *fakeRegistry) validSAS(r *http.Request) bool {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer SharedAccessSignature ")
	if !ok {
		return false
	}
	q := map[string]string{}
	for _, kv := range strings.Split(tok, "&") {
		k, v, _ := strings.Cut(kv, "=")
		q[k] = v
	}
	mac := hmac.New(sha256.New, []byte(f.key))
	mac.Write([]byte(q["sr"] + "\n" + q["se"]))
	sig, _ := url.QueryUnescape(q["sig"])
	return q["skn"] == "reg" && sig == base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

func newFake(t *testing.T, f *fakeRegistry) *httptest.Server {
	t.Helper()
	srv := httptest.NewTLSServer(f)
	t.Cleanup(srv.Close)
	return srv
}

func body(t *testing.T, schema, value string) []byte {
	t.Helper()
	s, err := avro.ParseSchema(schema)
	if err != nil {
		t.Fatal(err)
	}
	b, err := avro.Encode(s, []byte(value))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func azureDecoder(t *testing.T, srv *httptest.Server, key string, size int) *Decoder {
	t.Helper()
	var tok TokenSource
	if key != "" {
		tok = SASToken(srv.URL, "reg", secret.String(key))
	}
	c, err := NewAzure(srv.URL, tok, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewDecoder(Options{Registry: c, Framing: FramingAzure, CacheSize: size})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func ct(s string) *string { return &s }

func TestAzureDecodesAndCaches(t *testing.T) {
	f := &fakeRegistry{schemas: map[string]string{"0123abcd": userV1}, key: "c2VjcmV0"}
	srv := newFake(t, f)
	d := azureDecoder(t, srv, f.key, 0)
	b := body(t, userV1, `{"id":7,"name":"ann"}`)
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			out, err := d.AppendJSON(t.Context(), ct("avro/binary+0123abcd"), b, nil)
			if err != nil {
				t.Error(err)
				return
			}
			if string(out) != `{"id":7,"name":"ann"}` {
				t.Errorf("got %s", out)
			}
		})
	}
	wg.Wait()
	if n := f.gets.Load(); n != 1 {
		t.Errorf("registry asked %d times for one id, want once", n)
	}
	// A cached schema decodes whatever the context says: a partition that
	// is stopping writes the batch in hand.
	done, cancel := context.WithCancel(t.Context())
	cancel()
	for range 50 {
		if _, err := d.AppendJSON(done, ct("avro/binary+0123abcd"), b, nil); err != nil {
			t.Fatalf("with a cancelled context and the schema cached: %v", err)
		}
	}
}

func TestWrongTokenIsTransient(t *testing.T) {
	f := &fakeRegistry{schemas: map[string]string{"a1": userV1}, key: "c2VjcmV0"}
	srv := newFake(t, f)
	d := azureDecoder(t, srv, "d3Jvbmc=", 0)
	_, err := d.AppendJSON(t.Context(), ct("avro/binary+a1"), body(t, userV1, `{"id":1,"name":"x"}`), nil)
	if err == nil || errors.Is(err, ErrPoison) || !strings.Contains(err.Error(), "401") {
		t.Fatalf("err = %v, want a transient 401", err)
	}
}

func TestBoundedCache(t *testing.T) {
	f := &fakeRegistry{schemas: map[string]string{"x": userV1, "y": userV1, "z": userV1}}
	srv := newFake(t, f)
	d := azureDecoder(t, srv, "", 2)
	b := body(t, userV1, `{"id":1,"name":"x"}`)
	for _, id := range []string{"x", "y", "x", "z", "x", "y"} {
		if _, err := d.AppendJSON(t.Context(), ct("avro/binary+"+id), b, nil); err != nil {
			t.Fatal(err)
		}
	}
	// x, y, (x cached), z evicts y, (x cached), y again evicts z.
	if n := f.gets.Load(); n != 4 {
		t.Errorf("%d fetches, want 4 with room for 2 schemas", n)
	}
	if len(d.entries) != 2 || d.lru.Len() != 2 {
		t.Errorf("cache holds %d entries, want 2", len(d.entries))
	}
}

func TestPoisonAndOutage(t *testing.T) {
	f := &fakeRegistry{schemas: map[string]string{"a": userV1, "bad": `{"type":"record"`}}
	srv := newFake(t, f)
	d := azureDecoder(t, srv, "", 0)
	now := time.Now()
	d.opts.now = func() time.Time { return now }
	good := body(t, userV1, `{"id":1,"name":"x"}`)
	for name, c := range map[string]struct {
		ct   *string
		body []byte
	}{
		"no content type":   {nil, good},
		"json content type": {ct("application/json"), good},
		"unknown id":        {ct("avro/binary+nope"), good},
		"invalid schema":    {ct("avro/binary+bad"), good},
		"truncated body":    {ct("avro/binary+a"), good[:1]},
		"json body":         {ct("avro/binary+a"), []byte(`{"id":1}`)},
	} {
		t.Run(name, func(t *testing.T) {
			out, err := d.AppendJSON(t.Context(), c.ct, c.body, []byte("kept"))
			var pe *PoisonError
			if !errors.As(err, &pe) || !errors.Is(err, ErrPoison) {
				t.Fatalf("err = %v, want a PoisonError", err)
			}
			if string(out) != "kept" {
				t.Errorf("dst = %q", out)
			}
		})
	}
	// An unknown id is remembered for a while, then asked again.
	before := f.gets.Load()
	_, _ = d.AppendJSON(t.Context(), ct("avro/binary+nope"), good, nil)
	if f.gets.Load() != before {
		t.Error("an unknown id was asked again at once")
	}
	now = now.Add(unknownFor + time.Second)
	_, _ = d.AppendJSON(t.Context(), ct("avro/binary+nope"), good, nil)
	if f.gets.Load() != before+1 {
		t.Error("an unknown id was not asked again after unknownFor")
	}

	// An outage is transient, and a new id decodes once it is over.
	f.mu.Lock()
	f.schemas["later"] = userV1
	f.mu.Unlock()
	f.down.Store(true)
	_, err := d.AppendJSON(t.Context(), ct("avro/binary+later"), good, nil)
	if err == nil || errors.Is(err, ErrPoison) {
		t.Fatalf("during the outage: %v, want a transient error", err)
	}
	f.down.Store(false)
	if _, err := d.AppendJSON(t.Context(), ct("avro/binary+later"), good, nil); err != nil {
		t.Fatalf("after the outage: %v", err)
	}
}

func TestConfluentFraming(t *testing.T) {
	f := &fakeRegistry{schemas: map[string]string{"c7": userV1}, user: "u:p"}
	srv := newFake(t, f)
	c, err := NewConfluent(srv.URL, "u", "p", srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewDecoder(Options{Registry: c, Framing: FramingConfluent})
	if err != nil {
		t.Fatal(err)
	}
	framed := binary.BigEndian.AppendUint32([]byte{0}, 7)
	framed = append(framed, body(t, userV1, `{"id":3,"name":"bo"}`)...)
	out, err := d.AppendJSON(t.Context(), nil, framed, nil)
	if err != nil || string(out) != `{"id":3,"name":"bo"}` {
		t.Fatalf("got %s, %v", out, err)
	}
	for _, b := range [][]byte{{}, {1, 0, 0, 0, 7, 2}, {0, 0, 0}} {
		if _, err := d.AppendJSON(t.Context(), nil, b, nil); !errors.Is(err, ErrPoison) {
			t.Errorf("body %x: %v, want poison", b, err)
		}
	}
	wrong, _ := NewConfluent(srv.URL, "u", "wrong", srv.Client())
	d2, _ := NewDecoder(Options{Registry: wrong, Framing: FramingConfluent})
	if _, err := d2.AppendJSON(context.Background(), nil, framed, nil); err == nil || errors.Is(err, ErrPoison) {
		t.Errorf("wrong password: %v, want a transient error", err)
	}
}

func TestReaderSchema(t *testing.T) {
	v2 := `{"type":"record","name":"User","fields":[{"name":"id","type":"long"},{"name":"email","type":["null","string"],"default":null}]}`
	f := &fakeRegistry{schemas: map[string]string{"v1": userV1, "v2": v2}}
	srv := newFake(t, f)
	c, _ := NewAzure(srv.URL, nil, srv.Client())
	reader, _ := avro.ParseSchema(v2)
	d, _ := NewDecoder(Options{Registry: c, Framing: FramingAzure, Reader: reader})
	for id, want := range map[string]string{"v1": `{"id":1,"email":null}`, "v2": `{"id":1,"email":"a@b"}`} {
		schema := map[string]string{"v1": userV1, "v2": v2}[id]
		val := map[string]string{"v1": `{"id":1,"name":"x"}`, "v2": `{"id":1,"email":"a@b"}`}[id]
		out, err := d.AppendJSON(t.Context(), ct("avro/binary+"+id), body(t, schema, val), nil)
		if err != nil || string(out) != want {
			t.Errorf("%s: got %s, %v; want %s", id, out, err, want)
		}
	}
}
