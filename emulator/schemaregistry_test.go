package emulator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ehsink/ehsink/internal/secret"
)

const (
	ordersV1 = `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"long"}]}`
	ordersV2 = `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"long"},{"name":"note","type":["null","string"],"default":null}]}`
	avroJSON = "application/json; serialization=Avro"
	apiQuery = "?api-version=2023-07-01"
)

// registryClient talks HTTPS to a server's schema registry, trusting its
// certificate.
type registryClient struct {
	t     *testing.T
	base  string
	http  *http.Client
	token string // Authorization header value; "" sends none
	basic [2]string
}

func newRegistryClient(t *testing.T, srv *Server) *registryClient {
	t.Helper()
	if srv.SchemaRegistryAddr() == "" {
		t.Fatal("SchemaRegistryAddr is empty")
	}
	tlsCfg := trusting(t, srv.CertificatePEM())
	tlsCfg.ServerName = "" // verify the address itself: the certificate names 127.0.0.1
	return &registryClient{
		t:    t,
		base: "https://" + srv.SchemaRegistryAddr(),
		http: &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg}, Timeout: testTimeout},
	}
}

type registryAnswer struct {
	status int
	header http.Header
	body   string
}

func (c *registryClient) do(method, path, contentType, body string) registryAnswer {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.token != "" {
		req.Header.Set("Authorization", c.token)
	}
	if c.basic[0] != "" {
		req.SetBasicAuth(c.basic[0], c.basic[1])
	}
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return registryAnswer{resp.StatusCode, resp.Header, string(b)}
}

func (c *registryClient) register(group, name, schema string) registryAnswer {
	c.t.Helper()
	return c.do("PUT", "/$schemaGroups/"+group+"/schemas/"+name+apiQuery, avroJSON, schema)
}

// wantAzureError checks the service's error shape and code.
func wantAzureError(t *testing.T, a registryAnswer, status int, code, messagePart string) {
	t.Helper()
	var e struct {
		Error struct{ Code, Message string }
	}
	if a.status != status || json.Unmarshal([]byte(a.body), &e) != nil || e.Error.Code != code || !strings.Contains(e.Error.Message, messagePart) {
		t.Fatalf("answer %d %s, want %d with error code %q and a message containing %q", a.status, a.body, status, code, messagePart)
	}
}

var azureID = regexp.MustCompile(`^[0-9a-f]{32}$`)

// TestAzureSchemaRegistryRoutes: register answers 204 with the properties
// headers and a 32-hex-digit id; the same schema again keeps its id, a new
// definition is version 2; get-id (raw or as a JSON string, as the
// JavaScript client sends it), get by id and get by version answer what
// was registered; unknown ids and versions are 404 in the service's shape.
func TestAzureSchemaRegistryRoutes(t *testing.T) {
	srv := startEmulator(t, Config{SchemaRegistryAddr: "127.0.0.1:0"})
	c := newRegistryClient(t, srv)

	a := c.register("shop", "shop.Order", ordersV1)
	if a.status != http.StatusNoContent {
		t.Fatalf("register: %d %s", a.status, a.body)
	}
	id1 := a.header.Get("Schema-Id")
	if !azureID.MatchString(id1) {
		t.Fatalf("Schema-Id %q is not 32 lowercase hex digits", id1)
	}
	for h, want := range map[string]string{
		"Schema-Group-Name":  "shop",
		"Schema-Name":        "shop.Order",
		"Schema-Version":     "1",
		"Schema-Id-Location": c.base + "/$schemaGroups/$schemas/" + id1 + apiQuery,
		"Location":           c.base + "/$schemaGroups/shop/schemas/shop.Order/versions/1" + apiQuery,
	} {
		if got := a.header.Get(h); got != want {
			t.Errorf("%s = %q, want %q", h, got, want)
		}
	}
	// Whitespace does not make another schema.
	if again := c.register("shop", "shop.Order", "  "+strings.ReplaceAll(ordersV1, ",", ", ")+"\n"); again.header.Get("Schema-Id") != id1 || again.header.Get("Schema-Version") != "1" {
		t.Fatalf("registering the same schema again: %d id %q version %q, want id %s version 1", again.status, again.header.Get("Schema-Id"), again.header.Get("Schema-Version"), id1)
	}
	v2 := c.register("shop", "shop.Order", ordersV2)
	id2 := v2.header.Get("Schema-Id")
	if v2.status != http.StatusNoContent || v2.header.Get("Schema-Version") != "2" || id2 == id1 || !azureID.MatchString(id2) {
		t.Fatalf("registering a new definition: %d id %q version %q", v2.status, id2, v2.header.Get("Schema-Version"))
	}
	// The same definition in another group is another schema.
	if other := c.register("other", "shop.Order", ordersV1); other.header.Get("Schema-Id") == id1 || other.header.Get("Schema-Version") != "1" {
		t.Fatalf("another group: id %q version %q", other.header.Get("Schema-Id"), other.header.Get("Schema-Version"))
	}

	quoted, _ := json.Marshal(ordersV2)
	for _, body := range []string{ordersV2, string(quoted)} {
		got := c.do("POST", "/$schemaGroups/shop/schemas/shop.Order:get-id"+apiQuery, avroJSON, body)
		if got.status != http.StatusNoContent || got.header.Get("Schema-Id") != id2 || got.header.Get("Schema-Version") != "2" {
			t.Fatalf("get-id with body %.40q: %d id %q, want 204 id %s", body, got.status, got.header.Get("Schema-Id"), id2)
		}
	}
	// A primitive Avro schema is a JSON string itself.
	prim := c.register("shop", "amount", `"long"`)
	if prim.status != http.StatusNoContent {
		t.Fatalf(`registering "long": %d %s`, prim.status, prim.body)
	}
	if got := c.do("POST", "/$schemaGroups/shop/schemas/amount:get-id"+apiQuery, avroJSON, `"\"long\""`); got.header.Get("Schema-Id") != prim.header.Get("Schema-Id") {
		t.Fatalf(`get-id of "long" sent as a JSON string: %d %s`, got.status, got.body)
	}
	unknownDef := `{"type":"record","name":"Order","namespace":"shop","fields":[]}`
	wantAzureError(t, c.do("POST", "/$schemaGroups/shop/schemas/shop.Order:get-id"+apiQuery, avroJSON, unknownDef), 404, "ItemNotFound", "shop.Order")
	wantAzureError(t, c.do("POST", "/$schemaGroups/shop/schemas/nobody:get-id"+apiQuery, avroJSON, ordersV1), 404, "ItemNotFound", "nobody")

	for path, want := range map[string]struct{ id, version, def string }{
		"/$schemaGroups/$schemas/" + id1:                    {id1, "1", ordersV1},
		"/$schemaGroups/$schemas/" + id2:                    {id2, "2", ordersV2},
		"/$schemaGroups/shop/schemas/shop.Order/versions/1": {id1, "1", ordersV1},
		"/$schemaGroups/shop/schemas/shop.Order/versions/2": {id2, "2", ordersV2},
	} {
		got := c.do("GET", path+apiQuery, "", "")
		if got.status != http.StatusOK || got.body != want.def || got.header.Get("Schema-Id") != want.id ||
			got.header.Get("Schema-Version") != want.version || got.header.Get("Content-Type") != "application/json;serialization=Avro" {
			t.Errorf("GET %s: %d %q id %q version %q content type %q", path, got.status, got.body, got.header.Get("Schema-Id"), got.header.Get("Schema-Version"), got.header.Get("Content-Type"))
		}
	}
	wantAzureError(t, c.do("GET", "/$schemaGroups/$schemas/"+strings.Repeat("0", 32)+apiQuery, "", ""), 404, "ItemNotFound", strings.Repeat("0", 32))
	wantAzureError(t, c.do("GET", "/$schemaGroups/shop/schemas/shop.Order/versions/3"+apiQuery, "", ""), 404, "ItemNotFound", "version 3")

	// Every API version the SDKs use is served; others are refused.
	for _, v := range []string{"2022-10", "2021-10"} {
		if got := c.do("GET", "/$schemaGroups/$schemas/"+id1+"?api-version="+v, "", ""); got.status != http.StatusOK {
			t.Errorf("api-version %s: %d %s", v, got.status, got.body)
		}
	}
	wantAzureError(t, c.do("GET", "/$schemaGroups/$schemas/"+id1+"?api-version=2017-04", "", ""), 400, "InvalidRequest", "2017-04")
	wantAzureError(t, c.do("GET", "/$schemaGroups/$schemas/"+id1, "", ""), 400, "InvalidRequest", "api-version")
	wantAzureError(t, c.do("POST", "/$schemaGroups/shop/schemas/shop.Order"+apiQuery, avroJSON, ordersV1), 404, "ItemNotFound", "POST")
	wantAzureError(t, c.do("DELETE", "/$schemaGroups/shop/schemas/shop.Order"+apiQuery, "", ""), 404, "ItemNotFound", "DELETE")
}

// TestAzureSchemaRegistryBadSchema: a definition that is not Avro, or not
// JSON, or sent with a content type that is not a schema format, is
// refused with the service's error shape and nothing is registered.
func TestAzureSchemaRegistryBadSchema(t *testing.T) {
	srv := startEmulator(t, Config{SchemaRegistryAddr: "127.0.0.1:0"})
	c := newRegistryClient(t, srv)
	wantAzureError(t, c.register("shop", "shop.Order", `{"type":"record","name":"Order","fields":[{"name":"id","type":"lung"}]}`), 400, "InvalidSchema", "lung")
	wantAzureError(t, c.register("shop", "shop.Order", `{"type":"record","name":"Order"`), 400, "InvalidSchema", "not JSON")
	wantAzureError(t, c.do("PUT", "/$schemaGroups/shop/schemas/shop.Order"+apiQuery, "application/xml", ordersV1), 415, "InvalidSchemaType", "application/xml")
	wantAzureError(t, c.do("GET", "/$schemaGroups/shop/schemas/shop.Order/versions/1"+apiQuery, "", ""), 404, "ItemNotFound", "version 1")
	// The Custom format takes any text.
	if got := c.do("PUT", "/$schemaGroups/shop/schemas/free"+apiQuery, "text/plain; charset=utf-8", "not json at all"); got.status != http.StatusNoContent {
		t.Fatalf("Custom schema: %d %s", got.status, got.body)
	}
}

// TestAzureSchemaRegistryAuth: with keys, requests need a SAS token on the
// namespace (bare or as a Bearer token); a forged, expired, unknown-key or
// missing token is 401, a listen-only key may read but not register (403),
// a send-only key may do both, a token for one event hub or a
// hub-scoped policy does not cover the registry.
func TestAzureSchemaRegistryAuth(t *testing.T) {
	srv := startEmulator(t, Config{
		SchemaRegistryAddr: "127.0.0.1:0",
		Keys:               map[string]secret.String{"root": "cm9vdA=="},
		Policies: []Policy{
			{Name: "reader", Key: "cmVhZA==", Rights: RightListen},
			{Name: "writer", Key: "d3JpdGU=", Rights: RightSend},
			{Name: "hubonly", Key: "aHVi", EventHub: "orders"},
		},
	})
	c := newRegistryClient(t, srv)
	ns := "sb://" + srv.SchemaRegistryAddr() + "/"
	soon := time.Now().Add(time.Hour)
	bearer := func(keyName, key, resource string, expiry time.Time) string {
		return "Bearer " + sasToken(resource, keyName, key, expiry)
	}

	c.token = ""
	wantAzureError(t, c.register("shop", "shop.Order", ordersV1), 401, "Unauthorized", "Authorization")
	c.token = bearer("root", "forged", ns, soon)
	wantAzureError(t, c.register("shop", "shop.Order", ordersV1), 401, "Unauthorized", "invalid signature")
	c.token = bearer("root", "cm9vdA==", ns, time.Now().Add(-time.Minute))
	wantAzureError(t, c.register("shop", "shop.Order", ordersV1), 401, "Unauthorized", "ExpiredToken")
	c.token = bearer("nobody", "cm9vdA==", ns, soon)
	wantAzureError(t, c.register("shop", "shop.Order", ordersV1), 401, "Unauthorized", "nobody")
	c.token = bearer("root", "cm9vdA==", ns+"orders", soon)
	wantAzureError(t, c.register("shop", "shop.Order", ordersV1), 403, "Forbidden", "Send")
	c.token = bearer("hubonly", "aHVi", ns, soon)
	wantAzureError(t, c.register("shop", "shop.Order", ordersV1), 403, "Forbidden", "Send")
	c.token = bearer("reader", "cmVhZA==", ns, soon)
	wantAzureError(t, c.register("shop", "shop.Order", ordersV1), 403, "Forbidden", "Send")

	c.token = sasToken(ns, "root", "cm9vdA==", soon) // the bare token works too
	a := c.register("shop", "shop.Order", ordersV1)
	if a.status != http.StatusNoContent {
		t.Fatalf("register with the root key: %d %s", a.status, a.body)
	}
	id := a.header.Get("Schema-Id")
	c.token = bearer("writer", "d3JpdGU=", ns, soon)
	if got := c.register("shop", "shop.Order", ordersV2); got.status != http.StatusNoContent {
		t.Fatalf("register with a send-only key: %d %s", got.status, got.body)
	}
	for _, tok := range []string{bearer("reader", "cmVhZA==", ns, soon), bearer("writer", "d3JpdGU=", ns, soon)} {
		c.token = tok
		if got := c.do("GET", "/$schemaGroups/$schemas/"+id+apiQuery, "", ""); got.status != http.StatusOK || got.body != ordersV1 {
			t.Fatalf("read with %s: %d %s", tok[:30], got.status, got.body)
		}
	}
	c.token = bearer("reader", "cmVhZA==", ns, time.Now().Add(-time.Second))
	wantAzureError(t, c.do("GET", "/$schemaGroups/$schemas/"+id+apiQuery, "", ""), 401, "Unauthorized", "ExpiredToken")
	c.token = ""
	wantAzureError(t, c.do("GET", "/$schemaGroups/$schemas/"+id+apiQuery, "", ""), 401, "Unauthorized", "Authorization")
}

// TestSchemaRegistryPersists: with a DataDir, a restarted emulator serves
// the same Azure ids and versions and the same Confluent ids, and goes on
// numbering after them; without one a restart forgets.
func TestSchemaRegistryPersists(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{SchemaRegistryAddr: "127.0.0.1:0", DataDir: dir}

	first := startEmulator(t, cfg)
	c := newRegistryClient(t, first)
	id1 := c.register("shop", "shop.Order", ordersV1).header.Get("Schema-Id")
	id2 := c.register("shop", "shop.Order", ordersV2).header.Get("Schema-Id")
	cid := confluentRegister(t, c, "orders-value", ordersV1)
	if err := first.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}

	second := startEmulator(t, cfg)
	c = newRegistryClient(t, second)
	if got := c.do("GET", "/$schemaGroups/$schemas/"+id1+apiQuery, "", ""); got.status != http.StatusOK || got.body != ordersV1 {
		t.Fatalf("after a restart, id %s: %d %s", id1, got.status, got.body)
	}
	if got := c.do("GET", "/$schemaGroups/shop/schemas/shop.Order/versions/2"+apiQuery, "", ""); got.header.Get("Schema-Id") != id2 {
		t.Fatalf("after a restart, version 2 has id %q, want %s", got.header.Get("Schema-Id"), id2)
	}
	if again := c.register("shop", "shop.Order", ordersV1); again.header.Get("Schema-Id") != id1 || again.header.Get("Schema-Version") != "1" {
		t.Fatalf("after a restart, registering v1 again gave id %q version %q", again.header.Get("Schema-Id"), again.header.Get("Schema-Version"))
	}
	v3 := `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"long"},{"name":"qty","type":"int","default":1}]}`
	if got := c.register("shop", "shop.Order", v3); got.header.Get("Schema-Version") != "3" {
		t.Fatalf("after a restart, a new definition is version %q, want 3", got.header.Get("Schema-Version"))
	}
	if got := confluentRegister(t, c, "orders-value", ordersV1); got != cid {
		t.Fatalf("after a restart, the Confluent id is %d, want %d", got, cid)
	}
	if got := confluentRegister(t, c, "orders-value", ordersV2); got != cid+1 {
		t.Fatalf("after a restart, the next Confluent id is %d, want %d", got, cid+1)
	}

	memory := startEmulator(t, Config{SchemaRegistryAddr: "127.0.0.1:0"})
	c = newRegistryClient(t, memory)
	wantAzureError(t, c.do("GET", "/$schemaGroups/$schemas/"+id1+apiQuery, "", ""), 404, "ItemNotFound", id1)
}

func confluentRegister(t *testing.T, c *registryClient, subject, schema string) int {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"schema": schema, "schemaType": "AVRO"})
	a := c.do("POST", "/subjects/"+subject+"/versions", confluentContentType, string(body))
	var got struct{ ID int }
	if a.status != http.StatusOK || json.Unmarshal([]byte(a.body), &got) != nil || got.ID < 1 {
		t.Fatalf("confluent register %s: %d %s", subject, a.status, a.body)
	}
	return got.ID
}

func wantConfluentError(t *testing.T, a registryAnswer, status, code int) {
	t.Helper()
	var e struct {
		ErrorCode int `json:"error_code"`
		Message   string
	}
	if a.status != status || json.Unmarshal([]byte(a.body), &e) != nil || e.ErrorCode != code || e.Message == "" {
		t.Fatalf("answer %d %s, want %d with error_code %d and a message", a.status, a.body, status, code)
	}
}

// TestConfluentSchemaRegistryRoutes: ids from 1, one id per schema across
// subjects, versions per subject, lookups, latest, subjects, config, bad
// schemas (422) and unknown subjects, versions and ids (404), in
// Confluent's content type and error shape.
func TestConfluentSchemaRegistryRoutes(t *testing.T) {
	srv := startEmulator(t, Config{SchemaRegistryAddr: "127.0.0.1:0"})
	c := newRegistryClient(t, srv)
	getJSON := func(path string, v any) registryAnswer {
		t.Helper()
		a := c.do("GET", path, "", "")
		if a.status == http.StatusOK {
			if ct := a.header.Get("Content-Type"); ct != confluentContentType {
				t.Errorf("GET %s: Content-Type %q", path, ct)
			}
			if err := json.Unmarshal([]byte(a.body), v); err != nil {
				t.Fatalf("GET %s: %v in %s", path, err, a.body)
			}
		}
		return a
	}

	if id := confluentRegister(t, c, "orders-value", ordersV1); id != 1 {
		t.Fatalf("first id %d, want 1", id)
	}
	if id := confluentRegister(t, c, "orders-value", ordersV1); id != 1 {
		t.Fatalf("same schema again: id %d, want 1", id)
	}
	if id := confluentRegister(t, c, "orders-value", ordersV2); id != 2 {
		t.Fatalf("second schema: id %d, want 2", id)
	}
	if id := confluentRegister(t, c, "archive-value", ordersV1); id != 1 {
		t.Fatalf("the first schema under another subject: id %d, want 1", id)
	}

	var byID struct{ Schema string }
	if a := getJSON("/schemas/ids/2", &byID); a.status != http.StatusOK || byID.Schema != ordersV2 {
		t.Fatalf("GET /schemas/ids/2: %d %s", a.status, a.body)
	}
	type version struct {
		Subject string
		Version int
		ID      int
		Schema  string
	}
	for path, want := range map[string]version{
		"/subjects/orders-value/versions/latest": {"orders-value", 2, 2, ordersV2},
		"/subjects/orders-value/versions/1":      {"orders-value", 1, 1, ordersV1},
		"/subjects/archive-value/versions/-1":    {"archive-value", 1, 1, ordersV1},
	} {
		var got version
		if a := getJSON(path, &got); a.status != http.StatusOK || got != want {
			t.Errorf("GET %s: %d %+v, want %+v", path, a.status, got, want)
		}
	}
	var subjects []string
	if a := getJSON("/subjects", &subjects); a.status != http.StatusOK || fmt.Sprint(subjects) != "[orders-value archive-value]" {
		t.Fatalf("GET /subjects: %d %v", a.status, subjects)
	}
	var versions []int
	if a := getJSON("/subjects/orders-value/versions", &versions); a.status != http.StatusOK || fmt.Sprint(versions) != "[1 2]" {
		t.Fatalf("GET versions: %d %v", a.status, versions)
	}

	lookup := func(subject, schema string) registryAnswer {
		body, _ := json.Marshal(map[string]string{"schema": schema})
		return c.do("POST", "/subjects/"+subject, confluentContentType, string(body))
	}
	var found version
	if a := lookup("orders-value", ordersV2); a.status != http.StatusOK || json.Unmarshal([]byte(a.body), &found) != nil || found != (version{"orders-value", 2, 2, ordersV2}) {
		t.Fatalf("lookup: %d %s", a.status, a.body)
	}
	wantConfluentError(t, lookup("archive-value", ordersV2), 404, confluentSchemaNotFound)
	wantConfluentError(t, lookup("nobody", ordersV2), 404, confluentSubjectNotFound)
	wantConfluentError(t, c.do("GET", "/schemas/ids/9", "", ""), 404, confluentSchemaNotFound)
	wantConfluentError(t, c.do("GET", "/subjects/nobody/versions/latest", "", ""), 404, confluentSubjectNotFound)
	wantConfluentError(t, c.do("GET", "/subjects/orders-value/versions/7", "", ""), 404, confluentVersionNotFound)
	wantConfluentError(t, c.do("GET", "/subjects/orders-value/versions/x", "", ""), 422, confluentInvalidVersion)

	bad, _ := json.Marshal(map[string]string{"schema": `{"type":"record","name":"X","fields":[{"name":"a","type":"lung"}]}`})
	wantConfluentError(t, c.do("POST", "/subjects/orders-value/versions", confluentContentType, string(bad)), 422, confluentInvalidSchema)
	proto, _ := json.Marshal(map[string]string{"schema": "syntax = \"proto3\";", "schemaType": "PROTOBUF"})
	wantConfluentError(t, c.do("POST", "/subjects/orders-value/versions", confluentContentType, string(proto)), 422, confluentInvalidSchema)
	if id := confluentRegister(t, c, "orders-value", ordersV2); id != 2 {
		t.Fatalf("after refused schemas the next registration of v2 has id %d, want 2", id)
	}

	wantConfluentError(t, c.do("GET", "/config/orders-value", "", ""), 404, confluentNoSubjectConfig)
	if a := c.do("PUT", "/config/orders-value", confluentContentType, `{"compatibility":"backward"}`); a.status != http.StatusOK || !strings.Contains(a.body, `"BACKWARD"`) {
		t.Fatalf("PUT config: %d %s", a.status, a.body)
	}
	var cfg struct{ CompatibilityLevel string }
	if a := getJSON("/config/orders-value", &cfg); a.status != http.StatusOK || cfg.CompatibilityLevel != "BACKWARD" {
		t.Fatalf("GET config: %d %s", a.status, a.body)
	}
	wantConfluentError(t, c.do("PUT", "/config/orders-value", confluentContentType, `{"compatibility":"SIDEWAYS"}`), 422, confluentInvalidCompat)
}

// TestConfluentSchemaRegistryBasicAuth: with SchemaRegistryBasicAuth every
// Confluent route needs that user and password.
func TestConfluentSchemaRegistryBasicAuth(t *testing.T) {
	srv := startEmulator(t, Config{SchemaRegistryAddr: "127.0.0.1:0", SchemaRegistryBasicAuth: "kafka:s3cret"})
	c := newRegistryClient(t, srv)
	wantConfluentError(t, c.do("GET", "/subjects", "", ""), 401, confluentUnauthorized)
	c.basic = [2]string{"kafka", "wrong"}
	wantConfluentError(t, c.do("GET", "/schemas/ids/1", "", ""), 401, confluentUnauthorized)
	c.basic = [2]string{"kafka", "s3cret"}
	if id := confluentRegister(t, c, "orders-value", ordersV1); id != 1 {
		t.Fatalf("id %d", id)
	}
	if a := c.do("GET", "/schemas/ids/1", "", ""); a.status != http.StatusOK {
		t.Fatalf("GET with the password: %d %s", a.status, a.body)
	}
	if err := (Config{SchemaRegistryBasicAuth: "nocolon"}).Validate(); err == nil || !strings.Contains(err.Error(), "schema_registry_basic_auth") {
		t.Fatalf("Validate without a colon: %v", err)
	}
}

// TestSchemaRegistryCertificateShared: the registry serves the AMQPS
// listener's certificate, so clients trust one authority.
func TestSchemaRegistryCertificateShared(t *testing.T) {
	srv := startEmulator(t, Config{SchemaRegistryAddr: "127.0.0.1:0", TLS: &TLSOptions{}})
	if srv.TLSAddr() == "" || srv.CertificatePEM() == nil {
		t.Fatal("no AMQPS listener")
	}
	c := newRegistryClient(t, srv)
	if a := c.register("g", "shop.Order", ordersV1); a.status != http.StatusNoContent {
		t.Fatalf("register: %d %s", a.status, a.body)
	}
	// A client that trusts nothing is refused at the handshake.
	_, err := http.Post(c.base+"/subjects/x/versions", confluentContentType, bytes.NewReader([]byte("{}")))
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("an untrusting client: %v", err)
	}
	if off := startEmulator(t, Config{}); off.SchemaRegistryAddr() != "" || off.CertificatePEM() != nil {
		t.Fatalf("without SchemaRegistryAddr: addr %q", off.SchemaRegistryAddr())
	}
}
