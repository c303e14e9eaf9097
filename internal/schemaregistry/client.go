// Package schemaregistry fetches Avro schemas by id from Azure Schema
// Registry or a Confluent-compatible registry, and decodes the events of a
// connector whose `source.format` is avro: the schema id from the event
// (Azure's content type `avro/binary+<id>`, Confluent's magic byte and
// 4-byte id), the schema from a bounded cache or the registry, the body
// into the JSON the column mapping reads (package avro).
//
// Errors come in two kinds: a [PoisonError] belongs to the event (an
// unknown schema id, a body that is not Avro of its schema) and sends it
// to the dead letters; any other error is the registry's (unreachable,
// refusing the credentials) and is transient: the caller retries, the
// partition waits, nothing is lost.
package schemaregistry

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ehsink/ehsink/internal/netdial"
	"github.com/ehsink/ehsink/internal/secret"
)

// ErrUnknownSchema is matched by the error of a schema id the registry
// does not know (HTTP 404).
var ErrUnknownSchema = errors.New("unknown schema id")

// AzureAPIVersion is the Schema Registry REST API version the client speaks.
const AzureAPIVersion = "2023-07-01"

// requestTimeout bounds each registry call.
const requestTimeout = 10 * time.Second

// TokenSource returns the bearer token of the next request.
type TokenSource func(ctx context.Context) (string, error)

// Client is a registry: the schema text of an id.
type Client interface {
	Schema(ctx context.Context, id string) (string, error)
}

// HTTPClient returns the HTTP client of a registry: connections dialed as
// every other (package netdial), trusting caPEM besides the system's
// roots when it is not empty.
func HTTPClient(caPEM []byte) (*http.Client, error) {
	c := netdial.HTTPClient()
	if len(caPEM) > 0 {
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(caPEM) {
			return nil, errors.New("no PEM certificate in the CA")
		}
		c.Transport.(*http.Transport).TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return c, nil
}

// Azure is an Azure Schema Registry client. It is safe for concurrent use.
type Azure struct {
	base  string // https://host[:port]
	http  *http.Client
	token TokenSource
}

// NewAzure returns a client of the registry at endpoint (https://HOST or
// HOST, a namespace's fully qualified name or the emulator's registry
// address), authenticating with token (nil: no Authorization header).
func NewAzure(endpoint string, token TokenSource, hc *http.Client) (*Azure, error) {
	base, err := baseURL(endpoint)
	if err != nil {
		return nil, err
	}
	return &Azure{base: base, http: hc, token: token}, nil
}

func baseURL(endpoint string) (string, error) {
	if !strings.Contains(endpoint, "://") {
		endpoint = "https://" + endpoint
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("registry url %q: want https://HOST[:PORT]", endpoint)
	}
	return strings.TrimRight(u.Scheme+"://"+u.Host+u.Path, "/"), nil
}

// Schema returns the schema of id.
func (a *Azure) Schema(ctx context.Context, id string) (string, error) {
	b, _, err := a.do(ctx, http.MethodGet, "/$schemaGroups/$schemas/"+url.PathEscape(id), "", nil)
	return string(b), err
}

// Register registers schema as name in group and returns its id (the
// same id for the same schema).
func (a *Azure) Register(ctx context.Context, group, name, schema string) (string, error) {
	_, h, err := a.do(ctx, http.MethodPut, "/$schemaGroups/"+url.PathEscape(group)+"/schemas/"+url.PathEscape(name), "application/json; serialization=Avro", strings.NewReader(schema))
	if err != nil {
		return "", err
	}
	id := h.Get("Schema-Id")
	if id == "" {
		return "", errors.New("register: the registry answered no Schema-Id")
	}
	return id, nil
}

func (a *Azure) do(ctx context.Context, method, path, contentType string, body io.Reader) ([]byte, http.Header, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, a.base+path+"?api-version="+AzureAPIVersion, body)
	if err != nil {
		return nil, nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if a.token != nil {
		tok, err := a.token(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("schema registry token: %w", err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	return send(a.http, req)
}

func send(hc *http.Client, req *http.Request) ([]byte, http.Header, error) {
	resp, err := hc.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("schema registry: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, nil, fmt.Errorf("schema registry: %s %s: %w", req.Method, req.URL.Path, err)
	}
	if resp.StatusCode/100 == 2 {
		return b, resp.Header, nil
	}
	msg := serviceMessage(b)
	if resp.StatusCode == http.StatusNotFound {
		return nil, nil, fmt.Errorf("%w (%s %s: 404 %s)", ErrUnknownSchema, req.Method, req.URL.Path, msg)
	}
	return nil, nil, fmt.Errorf("schema registry: %s %s: %s %s", req.Method, req.URL.Path, resp.Status, msg)
}

// serviceMessage reads an Azure ({"error":{"message"}}) or Confluent
// ({"message"}) error body.
func serviceMessage(b []byte) string {
	var e struct {
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
		Message string `json:"message"`
	}
	if json.Unmarshal(b, &e) == nil {
		if e.Error != nil {
			return e.Error.Code + ": " + e.Error.Message
		}
		if e.Message != "" {
			return e.Message
		}
	}
	if len(b) > 200 {
		b = b[:200]
	}
	return strings.TrimSpace(string(b))
}

// SASToken returns a token source signing Shared Access Signatures for
// the namespace of registry endpoint with a connection string's key, each
// valid for an hour and renewed five minutes before it runs out.
func SASToken(endpoint, keyName string, key secret.String) TokenSource {
	var (
		mu      sync.Mutex
		tok     string
		expires time.Time
	)
	return func(context.Context) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		now := time.Now()
		if tok != "" && now.Before(expires.Add(-5*time.Minute)) {
			return tok, nil
		}
		base, err := baseURL(endpoint)
		if err != nil {
			return "", err
		}
		expires = now.Add(time.Hour)
		sr := url.QueryEscape(strings.ToLower(base) + "/")
		se := strconv.FormatInt(expires.Unix(), 10)
		mac := hmac.New(sha256.New, []byte(key.Reveal()))
		mac.Write([]byte(sr + "\n" + se))
		sig := url.QueryEscape(base64.StdEncoding.EncodeToString(mac.Sum(nil)))
		tok = "SharedAccessSignature sr=" + sr + "&sig=" + sig + "&se=" + se + "&skn=" + url.QueryEscape(keyName)
		return tok, nil
	}
}

// Confluent is a Confluent-compatible Schema Registry client. It is safe
// for concurrent use.
type Confluent struct {
	base           string
	http           *http.Client
	user, password secret.String
}

// NewConfluent returns a client of the registry at endpoint, with basic
// auth when user is not empty.
func NewConfluent(endpoint string, user, password secret.String, hc *http.Client) (*Confluent, error) {
	if !strings.Contains(endpoint, "://") {
		return nil, fmt.Errorf("registry url %q: want http(s)://HOST[:PORT]", endpoint)
	}
	base, err := baseURL(endpoint)
	if err != nil {
		return nil, err
	}
	return &Confluent{base: base, http: hc, user: user, password: password}, nil
}

// Schema returns the schema of id (a decimal integer).
func (c *Confluent) Schema(ctx context.Context, id string) (string, error) {
	b, err := c.do(ctx, http.MethodGet, "/schemas/ids/"+url.PathEscape(id), nil)
	if err != nil {
		return "", err
	}
	return avroSchemaOf(b, "schema "+id)
}

// avroSchemaOf reads the Avro schema of a Confluent answer ({"schema",
// "schemaType"}) about what.
func avroSchemaOf(b []byte, what string) (string, error) {
	var r struct {
		Schema     string `json:"schema"`
		SchemaType string `json:"schemaType"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return "", fmt.Errorf("schema registry: %s: %w", what, err)
	}
	if r.SchemaType != "" && !strings.EqualFold(r.SchemaType, "AVRO") {
		return "", fmt.Errorf("%s is a %s schema, not Avro", what, r.SchemaType)
	}
	return r.Schema, nil
}

// Register registers schema under subject and returns its id.
func (c *Confluent) Register(ctx context.Context, subject, schema string) (int, error) {
	body, _ := json.Marshal(map[string]string{"schema": schema, "schemaType": "AVRO"})
	b, err := c.do(ctx, http.MethodPost, "/subjects/"+url.PathEscape(subject)+"/versions", strings.NewReader(string(body)))
	if err != nil {
		return 0, err
	}
	var r struct {
		ID int `json:"id"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return 0, fmt.Errorf("schema registry: register %s: %w", subject, err)
	}
	return r.ID, nil
}

func (c *Confluent) do(ctx context.Context, method, path string, body io.Reader) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/vnd.schemaregistry.v1+json")
	if body != nil {
		req.Header.Set("Content-Type", "application/vnd.schemaregistry.v1+json")
	}
	if c.user != "" {
		req.SetBasicAuth(c.user.Reveal(), c.password.Reveal())
	}
	b, _, err := send(c.http, req)
	return b, err
}

// Versions returns every version of the schema named name in group,
// oldest first. The service lists no versions in the API version spoken
// here, so the versions are read from 1 up until one is unknown: they are
// numbered from 1 without gaps. An error wrapping ErrUnknownSchema means
// nothing is registered under that name yet.
func (a *Azure) Versions(ctx context.Context, group, name string) ([]string, error) {
	var versions []string
	for v := 1; ; v++ {
		b, _, err := a.do(ctx, http.MethodGet, "/$schemaGroups/"+url.PathEscape(group)+"/schemas/"+url.PathEscape(name)+"/versions/"+strconv.Itoa(v), "", nil)
		switch {
		case errors.Is(err, ErrUnknownSchema) && v > 1:
			return versions, nil
		case err != nil:
			return nil, fmt.Errorf("schema %s in group %s version %d: %w", name, group, v, err)
		}
		versions = append(versions, string(b))
	}
}

// Versions returns every schema registered under subject, oldest first.
// An error wrapping ErrUnknownSchema means the subject has none yet.
func (c *Confluent) Versions(ctx context.Context, subject string) ([]string, error) {
	path := "/subjects/" + url.PathEscape(subject) + "/versions"
	b, err := c.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return nil, fmt.Errorf("subject %s: %w", subject, err)
	}
	var numbers []int
	if err := json.Unmarshal(b, &numbers); err != nil {
		return nil, fmt.Errorf("subject %s: the versions are not a list of numbers: %w", subject, err)
	}
	slices.Sort(numbers)
	versions := make([]string, 0, len(numbers))
	for _, v := range numbers {
		b, err := c.do(ctx, http.MethodGet, path+"/"+strconv.Itoa(v), nil)
		if err != nil {
			return nil, fmt.Errorf("subject %s version %d: %w", subject, v, err)
		}
		text, err := avroSchemaOf(b, fmt.Sprintf("version %d of subject %s", v, subject))
		if err != nil {
			return nil, err
		}
		versions = append(versions, text)
	}
	if len(versions) == 0 {
		return nil, fmt.Errorf("subject %s has no versions: %w", subject, ErrUnknownSchema)
	}
	return versions, nil
}
