package apidoc

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ehsink/ehsink/internal/avro"
	"github.com/ehsink/ehsink/internal/schemaregistry"
)

// documentedRequest is an HTTP request written in backticks in the docs:
// `GET /schemas/ids/{id}`.
var documentedRequest = regexp.MustCompile("`((?:GET|POST|PUT|DELETE|PATCH) /[^`\\s]*)`")

// TestAvroRegistryRequests holds docs/configuration.md's "Avro events" to
// what a connector asks a registry: a decoder (one per connector, shared
// by its partitions) decodes events of two schema ids from several
// goroutines against a registry of each type that records every request.
// Each registry sees one GET per id and nothing else, and that request is
// the one the section names; a second decoder (another connector) asks
// again, since caches are per connector.
func TestAvroRegistryRequests(t *testing.T) {
	text, err := os.ReadFile(configDoc)
	if err != nil {
		t.Fatal(err)
	}
	section := sectionText(string(text), "### Avro events")
	var documented []string
	for _, m := range documentedRequest.FindAllStringSubmatch(section, -1) {
		documented = append(documented, m[1])
	}
	const schema = `{"type":"record","name":"Ping","fields":[{"name":"n","type":"int"}]}`
	parsed, err := avro.ParseSchema(schema)
	if err != nil {
		t.Fatal(err)
	}
	value, err := avro.Encode(parsed, []byte(`{"n":7}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		framing schemaregistry.Framing
		idPath  *regexp.Regexp // the path of a schema request, its id as group 1
		want    string         // the request as the docs write it
		client  func(url string, hc *http.Client) (schemaregistry.Client, error)
		event   func(id int) (*string, []byte)
	}{
		{
			name: "confluent", framing: schemaregistry.FramingConfluent,
			idPath: regexp.MustCompile(`^/schemas/ids/([0-9]+)$`), want: "GET /schemas/ids/{id}",
			client: func(url string, hc *http.Client) (schemaregistry.Client, error) {
				return schemaregistry.NewConfluent(url, "reader", "secret", hc)
			},
			event: func(id int) (*string, []byte) {
				body := binary.BigEndian.AppendUint32([]byte{0}, uint32(id))
				return nil, append(body, value...)
			},
		},
		{
			name: "azure", framing: schemaregistry.FramingAzure,
			idPath: regexp.MustCompile(`^/\$schemaGroups/\$schemas/([0-9]+)$`), want: "GET /$schemaGroups/$schemas/{id}",
			client: func(url string, hc *http.Client) (schemaregistry.Client, error) {
				return schemaregistry.NewAzure(url, nil, hc)
			},
			event: func(id int) (*string, []byte) {
				ct := fmt.Sprintf("%s%d", schemaregistry.AzureContentTypePrefix, id)
				return &ct, value
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var requests []string // "METHOD path" with the id as {id}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				path := r.URL.Path
				if m := tc.idPath.FindStringSubmatch(path); m != nil {
					path = strings.Replace(path, m[1], "{id}", 1)
				}
				mu.Lock()
				requests = append(requests, r.Method+" "+path)
				mu.Unlock()
				if tc.idPath.MatchString(r.URL.Path) && r.Method == http.MethodGet {
					if tc.framing == schemaregistry.FramingConfluent {
						_ = json.NewEncoder(w).Encode(map[string]string{"schema": schema})
					} else {
						_, _ = w.Write([]byte(schema))
					}
					return
				}
				http.NotFound(w, r)
			}))
			defer srv.Close()
			decode := func() {
				client, err := tc.client(srv.URL, srv.Client())
				if err != nil {
					t.Fatal(err)
				}
				dec, err := schemaregistry.NewDecoder(schemaregistry.Options{Registry: client, Framing: tc.framing})
				if err != nil {
					t.Fatal(err)
				}
				var wg sync.WaitGroup
				for range 8 { // the partitions of one connector
					wg.Go(func() {
						for i := range 20 {
							ct, body := tc.event(11 + i%2)
							out, err := dec.AppendJSON(context.Background(), ct, body, nil)
							if err != nil || string(out) != `{"n":7}` {
								t.Errorf("decoded %s, %v", out, err)
							}
						}
					})
				}
				wg.Wait()
			}
			seen := func() []string {
				mu.Lock()
				defer mu.Unlock()
				return slices.Clone(requests)
			}
			decode()
			want := []string{tc.want, tc.want} // one per id
			if got := seen(); !slices.Equal(got, want) {
				t.Errorf("one connector's requests: %q, want %q (one GET per schema id, nothing else)", got, want)
			}
			decode() // another connector: its own cache
			if got := seen(); len(got) != 4 {
				t.Errorf("two connectors made %d requests, want 4: a cache per connector", len(got))
			}
			if !slices.Contains(documented, tc.want) {
				t.Errorf("docs/configuration.md's Avro events section does not name %q, the one request a %s registry must serve (it names %q)", tc.want, tc.name, documented)
			}
		})
	}
	// A request the section names must be one a connector makes, or the
	// registry write of `ehsink send --avro`, or the ops API's restart.
	for _, d := range documented {
		switch d {
		case "GET /schemas/ids/{id}", "GET /$schemaGroups/$schemas/{id}", "POST /v1/connectors/{name}/restart",
			versionsConfluent, versionConfluent, versionAzure: // columns: auto, TestAvroVersionsRequests
		default:
			t.Errorf("docs/configuration.md's Avro events section names %q, which no registry request or API of ehsink is", d)
		}
	}
}

// The requests columns: auto makes at start, as the Avro events section
// writes them.
const (
	versionsConfluent = "GET /subjects/{subject}/versions"
	versionConfluent  = "GET /subjects/{subject}/versions/{v}"
	versionAzure      = "GET /$schemaGroups/{group}/schemas/{subject}/versions/{v}"
)

// TestAvroVersionsRequests holds the section's columns: auto requests to
// what the clients send: Confluent's list of the subject's versions, then
// each, and Azure's versions from 1 until one is unknown; both oldest
// first.
func TestAvroVersionsRequests(t *testing.T) {
	text, err := os.ReadFile(configDoc)
	if err != nil {
		t.Fatal(err)
	}
	section := sectionText(string(text), "### Avro events")
	const v1, v2 = `{"type":"record","name":"P","fields":[]}`, `{"type":"record","name":"P","fields":[{"name":"n","type":"int","default":0}]}`
	var requests []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests = append(requests, r.Method+" "+r.URL.Path)
		switch r.URL.Path {
		case "/subjects/orders-value/versions":
			_, _ = w.Write([]byte("[2,1]"))
		case "/subjects/orders-value/versions/1":
			_ = json.NewEncoder(w).Encode(map[string]string{"schema": v1})
		case "/subjects/orders-value/versions/2":
			_ = json.NewEncoder(w).Encode(map[string]string{"schema": v2})
		case "/$schemaGroups/shop/schemas/shop.P/versions/1":
			_, _ = w.Write([]byte(v1))
		case "/$schemaGroups/shop/schemas/shop.P/versions/2":
			_, _ = w.Write([]byte(v2))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	c, err := schemaregistry.NewConfluent(srv.URL, "", "", srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	if got, err := c.Versions(t.Context(), "orders-value"); err != nil || !slices.Equal(got, []string{v1, v2}) {
		t.Errorf("confluent versions: %q, %v", got, err)
	}
	a, err := schemaregistry.NewAzure(srv.URL, nil, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	if got, err := a.Versions(t.Context(), "shop", "shop.P"); err != nil || !slices.Equal(got, []string{v1, v2}) {
		t.Errorf("azure versions: %q, %v", got, err)
	}
	want := []string{"GET /subjects/orders-value/versions", "GET /subjects/orders-value/versions/1", "GET /subjects/orders-value/versions/2", "GET /$schemaGroups/shop/schemas/shop.P/versions/1",
		"GET /$schemaGroups/shop/schemas/shop.P/versions/2", "GET /$schemaGroups/shop/schemas/shop.P/versions/3"}
	if !slices.Equal(requests, want) {
		t.Errorf("requests %q, want %q", requests, want)
	}
	for _, d := range []string{versionsConfluent, versionConfluent, versionAzure} {
		if !strings.Contains(section, "`"+d+"`") {
			t.Errorf("the Avro events section does not name %q", d)
		}
	}
}

// sectionText returns the part of a Markdown text (its code blocks left
// out) under heading, up to the next heading of the same or a higher level.
func sectionText(text, heading string) string {
	level := headingLevel(heading)
	var b strings.Builder
	in := false
	for l := range strings.SplitSeq(outsideCode(text), "\n") {
		switch {
		case l == heading:
			in = true
		case in && headingLevel(l) <= level:
			return b.String()
		case in:
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}
