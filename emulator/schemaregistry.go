package emulator

// Behavior: the schema registries (Config.SchemaRegistryAddr), one HTTPS
// listener with the emulator's certificate (Server.CertificatePEM).
//
// Azure Schema Registry, as the service serves it at the namespace and as
// @azure/schema-registry (and the other Azure SDKs) call it. Every request
// carries api-version 2023-07-01, 2022-10 or 2021-10 (else 400).
//
//	PUT  /$schemaGroups/{group}/schemas/{name}                 register: 204
//	POST /$schemaGroups/{group}/schemas/{name}:get-id          properties: 204, 404 unknown
//	GET  /$schemaGroups/$schemas/{id}                          200 definition, 404 unknown
//	GET  /$schemaGroups/{group}/schemas/{name}/versions/{v}    200 definition, 404 unknown
//
// The body is the definition; Content-Type "application/json;
// serialization=Avro" (or Json, or "text/plain; charset=utf-8" for Custom)
// says its format, anything else answers 415. A body that is a JSON string
// holding JSON holds the definition as that string (the JavaScript client
// sends get-id that way). An Avro definition must parse (hamba/avro), else
// 400 InvalidSchema naming the parser's complaint. Success answers carry
// Schema-Id, Schema-Id-Location, Schema-Group-Name, Schema-Name,
// Schema-Version and Location headers; GETs answer the definition with
// Content-Type "application/json;serialization=<format>". Errors answer the
// service's shape {"error":{"code":"...","message":"..."}}. Any group
// exists (the service needs groups created beforehand).
//
// Authorization: with keys or policies (auth.go), "Authorization: Bearer
// <SharedAccessSignature token>" (or the bare token) is verified as CBS
// verifies it; the claim must cover the namespace (an sr or policy naming
// one event hub does not). Registering needs Send (or Manage), reading any
// right. A missing, malformed, forged or expired token answers 401, a
// claim without the right 403. Without keys or policies nothing is checked.
//
// Confluent Schema Registry, for Kafka-style producers (ids are integers
// from 1, a separate space from Azure's; Content-Type
// application/vnd.schemaregistry.v1+json; errors {"error_code":N,"message":"..."}):
//
//	POST /subjects/{subject}/versions         {"schema":"...","schemaType":"AVRO"} -> {"id":N}
//	POST /subjects/{subject}                  lookup -> {"subject","version","id","schema"}, 404 40401/40403
//	GET  /subjects                            ["subject",...]
//	GET  /subjects/{subject}/versions         [1,2,...]
//	GET  /subjects/{subject}/versions/{v}     v a number or "latest"
//	GET  /schemas/ids/{id}                    {"schema":"..."}
//	GET|PUT /config/{subject}                 compatibility level (recorded, not enforced)
//
// Only AVRO schemas are accepted (422 42201 otherwise, or when the schema
// does not parse). With Config.SchemaRegistryBasicAuth every Confluent
// request needs that user and password (401 40101 otherwise).

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hamba/avro/v2"

	"github.com/ehsink/ehsink/emulator/internal/schemas"
)

// schemaAPIVersions are the Azure Schema Registry API versions served;
// 2023-07-01 is the one @azure/schema-registry 1.3 sends.
var schemaAPIVersions = []string{"2023-07-01", "2022-10", "2021-10"}

// maxSchemaBytes bounds a request body: the service's limit on a schema
// is 1 MB.
const maxSchemaBytes = 1 << 20

// readRights are the rights any one of which reads schemas: a Send-only
// producer reads the schemas it serializes with, as on the service.
var readRights = []Rights{RightListen, RightSend}

const confluentContentType = "application/vnd.schemaregistry.v1+json"

// startSchemaRegistry listens on cfg.SchemaRegistryAddr and serves both
// registries over TLS with tlsCfg, on a goroutine s.wg owns.
func (s *Server) startSchemaRegistry(ctx context.Context, tlsCfg *tls.Config) error {
	store, err := schemas.Open(s.cfg.DataDir)
	if err != nil {
		return fmt.Errorf("emulator: %w", err)
	}
	s.schemas = store
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.cfg.SchemaRegistryAddr)
	if err != nil {
		return fmt.Errorf("emulator: schema registry listen on %s: %w", s.cfg.SchemaRegistryAddr, err)
	}
	s.registryLn = ln
	s.registry = &http.Server{
		Handler:           s.schemaRegistryHandler(),
		TLSConfig:         tlsCfg.Clone(),
		ReadHeaderTimeout: 10 * time.Second,
		// Handshake failures (a client that does not trust the
		// certificate) are the client's problem: debug, not stderr.
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.registry.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("schema registry server failed", "err", err)
		}
	}()
	return nil
}

// schemaRegistryHandler routes both registries' requests.
func (s *Server) schemaRegistryHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /$schemaGroups/{group}/schemas/{name}", s.azureRegister)
	mux.HandleFunc("POST /$schemaGroups/{group}/schemas/{name}", s.azureGetID)
	mux.HandleFunc("GET /$schemaGroups/$schemas/{id}", s.azureByID)
	mux.HandleFunc("GET /$schemaGroups/{group}/schemas/{name}/versions/{version}", s.azureByVersion)

	mux.HandleFunc("POST /subjects/{subject}/versions", s.confluent(s.confluentRegister))
	mux.HandleFunc("POST /subjects/{subject}", s.confluent(s.confluentLookup))
	mux.HandleFunc("GET /subjects", s.confluent(s.confluentSubjects))
	mux.HandleFunc("GET /subjects/{subject}/versions", s.confluent(s.confluentVersions))
	mux.HandleFunc("GET /subjects/{subject}/versions/{version}", s.confluent(s.confluentVersion))
	mux.HandleFunc("GET /schemas/ids/{id}", s.confluent(s.confluentByID))
	mux.HandleFunc("GET /config/{subject}", s.confluent(s.confluentGetConfig))
	mux.HandleFunc("PUT /config/{subject}", s.confluent(s.confluentPutConfig))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/$schemaGroups") {
			azureError(w, http.StatusNotFound, "ItemNotFound", fmt.Sprintf("no schema registry operation %s %s", r.Method, r.URL.Path))
			return
		}
		confluentError(w, http.StatusNotFound, 404, fmt.Sprintf("HTTP 404 Not Found: %s %s", r.Method, r.URL.Path))
	})
	return mux
}

// SchemaRegistryAddr returns the schema registries' HTTPS address
// (host:port; clients use https://ADDR), or "" without
// Config.SchemaRegistryAddr.
func (s *Server) SchemaRegistryAddr() string {
	if s.registryLn == nil {
		return ""
	}
	return s.registryLn.Addr().String()
}

// azureError writes the service's error shape.
func azureError(w http.ResponseWriter, status int, code, message string) {
	writeJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": message}})
}

// azureRequest checks what every Azure request needs (api-version, a
// token with one of needs) and returns false after answering when it fails.
func (s *Server) azureRequest(w http.ResponseWriter, r *http.Request, entity string, needs ...Rights) bool {
	v := r.URL.Query().Get("api-version")
	if !slices.Contains(schemaAPIVersions, v) {
		azureError(w, http.StatusBadRequest, "InvalidRequest",
			fmt.Sprintf("api-version %q is not supported; use one of %s", v, strings.Join(schemaAPIVersions, ", ")))
		return false
	}
	if status, code, msg := s.authorizeRegistry(r, entity, needs); status != 0 {
		azureError(w, status, code, msg)
		return false
	}
	return true
}

// authorizeRegistry checks the request's SAS token for one of needs on
// entity (a lower-case path under the namespace). It returns 0 when
// allowed, else the status, code and message to answer.
func (s *Server) authorizeRegistry(r *http.Request, entity string, needs []Rights) (int, string, string) {
	if !s.authEnabled() {
		return 0, "", ""
	}
	token := strings.TrimSpace(r.Header.Get("Authorization"))
	if token == "" {
		return http.StatusUnauthorized, "Unauthorized", "Authorization header is missing: send 'Bearer <SharedAccessSignature token>'."
	}
	if scheme, rest, ok := strings.Cut(token, " "); ok && strings.EqualFold(scheme, "Bearer") {
		token = strings.TrimSpace(rest)
	}
	now := time.Now()
	cl, reason := s.verifyToken(token, now)
	if reason != "" {
		return http.StatusUnauthorized, "Unauthorized", reason
	}
	if slices.ContainsFunc(needs, func(need Rights) bool { return cl.covers(entity, need, now) }) {
		return 0, "", ""
	}
	return http.StatusForbidden, "Forbidden", fmt.Sprintf("Unauthorized access. '%s' claim(s) are required to perform this operation. Resource: 'sb://%s/%s'.",
		needs[0], r.Host, entity)
}

// readDefinition reads the body of a register or get-id request: its
// format from Content-Type and the definition, which an Avro one must
// parse. It returns false after answering when the body is unacceptable.
func readDefinition(w http.ResponseWriter, r *http.Request) (format, definition string, ok bool) {
	mediaType, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch {
	case err == nil && mediaType == "application/json" && strings.EqualFold(params["serialization"], "avro"):
		format = "Avro"
	case err == nil && mediaType == "application/json" && strings.EqualFold(params["serialization"], "json"):
		format = "Json"
	case err == nil && mediaType == "text/plain":
		format = "Custom"
	default:
		azureError(w, http.StatusUnsupportedMediaType, "InvalidSchemaType",
			fmt.Sprintf("Content-Type %q is not a schema format: use 'application/json; serialization=Avro', 'application/json; serialization=Json' or 'text/plain; charset=utf-8'", r.Header.Get("Content-Type")))
		return "", "", false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxSchemaBytes))
	if err != nil {
		azureError(w, http.StatusRequestEntityTooLarge, "InvalidRequest", fmt.Sprintf("reading the schema: %v", err))
		return "", "", false
	}
	definition = string(body)
	if format != "Custom" {
		// A JSON string holding JSON is the definition sent as a string
		// (get-id from JavaScript); a string holding a name ("long") is
		// itself an Avro schema.
		var unwrapped string
		if json.Unmarshal(body, &unwrapped) == nil && json.Valid([]byte(unwrapped)) {
			definition = unwrapped
		}
		if !json.Valid([]byte(definition)) {
			azureError(w, http.StatusBadRequest, "InvalidSchema", fmt.Sprintf("the %s schema is not JSON", format))
			return "", "", false
		}
	}
	if format == "Avro" {
		if err := parseAvro(definition); err != nil {
			azureError(w, http.StatusBadRequest, "InvalidSchema", fmt.Sprintf("the Avro schema does not parse: %v", err))
			return "", "", false
		}
	}
	return format, definition, true
}

// parseAvro reports why definition is not an Avro schema. Each parse gets
// its own cache, so named types of one registration never leak into
// another (hamba's default cache is process-wide).
func parseAvro(definition string) error {
	_, err := avro.ParseWithCache(definition, "", &avro.SchemaCache{})
	return err
}

// registryEntity is the path a token must cover for group.
func registryEntity(group string) string { return "$schemagroups/" + strings.ToLower(group) }

// writeAzureProperties sets the headers the SDKs read a schema's
// properties from.
func writeAzureProperties(w http.ResponseWriter, r *http.Request, a schemas.Azure) {
	base := "https://" + r.Host
	api := "?api-version=" + url.QueryEscape(r.URL.Query().Get("api-version"))
	h := w.Header()
	h.Set("Schema-Id", a.ID)
	h.Set("Schema-Id-Location", base+"/$schemaGroups/$schemas/"+a.ID+api)
	h.Set("Schema-Group-Name", a.Group)
	h.Set("Schema-Name", a.Name)
	h.Set("Schema-Version", strconv.Itoa(a.Version))
	h.Set("Location", base+"/$schemaGroups/"+url.PathEscape(a.Group)+"/schemas/"+url.PathEscape(a.Name)+"/versions/"+strconv.Itoa(a.Version)+api)
}

func (s *Server) azureRegister(w http.ResponseWriter, r *http.Request) {
	group, name := r.PathValue("group"), r.PathValue("name")
	if !s.azureRequest(w, r, registryEntity(group), RightSend) {
		return
	}
	format, definition, ok := readDefinition(w, r)
	if !ok {
		return
	}
	a, created, err := s.schemas.RegisterAzure(group, name, format, definition)
	if err != nil {
		s.log.Error("schema registry: register", "group", group, "name", name, "err", err)
		azureError(w, http.StatusInternalServerError, "InternalError", err.Error())
		return
	}
	if created {
		s.log.Debug("schema registered", "group", group, "name", name, "version", a.Version, "id", a.ID)
	}
	writeAzureProperties(w, r, a)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) azureGetID(w http.ResponseWriter, r *http.Request) {
	// The pattern's wildcard takes the whole last segment, "{name}:get-id".
	group := r.PathValue("group")
	name, ok := strings.CutSuffix(r.PathValue("name"), ":get-id")
	if !ok {
		azureError(w, http.StatusNotFound, "ItemNotFound", fmt.Sprintf("no schema registry operation POST %s", r.URL.Path))
		return
	}
	if !s.azureRequest(w, r, registryEntity(group), readRights...) {
		return
	}
	format, definition, ok := readDefinition(w, r)
	if !ok {
		return
	}
	a, found := s.schemas.LookupAzure(group, name, format, definition)
	if !found {
		azureError(w, http.StatusNotFound, "ItemNotFound",
			fmt.Sprintf("Schema '%s' with the given definition does not exist in group '%s'.", name, group))
		return
	}
	writeAzureProperties(w, r, a)
	w.WriteHeader(http.StatusNoContent)
}

func writeAzureDefinition(w http.ResponseWriter, r *http.Request, a schemas.Azure) {
	writeAzureProperties(w, r, a)
	if a.Format == "Custom" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	} else {
		w.Header().Set("Content-Type", "application/json;serialization="+a.Format)
	}
	w.WriteHeader(http.StatusOK)
	io.WriteString(w, a.Definition)
}

func (s *Server) azureByID(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !s.azureRequest(w, r, registryEntity("$schemas"), readRights...) {
		return
	}
	a, ok := s.schemas.AzureByID(id)
	if !ok {
		azureError(w, http.StatusNotFound, "ItemNotFound", fmt.Sprintf("Schema id '%s' does not exist.", id))
		return
	}
	writeAzureDefinition(w, r, a)
}

func (s *Server) azureByVersion(w http.ResponseWriter, r *http.Request) {
	group, name := r.PathValue("group"), r.PathValue("name")
	if !s.azureRequest(w, r, registryEntity(group), readRights...) {
		return
	}
	v, err := strconv.Atoi(r.PathValue("version"))
	if err != nil || v < 1 {
		azureError(w, http.StatusBadRequest, "InvalidRequest", fmt.Sprintf("schema version %q is not a positive number", r.PathValue("version")))
		return
	}
	a, ok := s.schemas.AzureVersion(group, name, v)
	if !ok {
		azureError(w, http.StatusNotFound, "ItemNotFound", fmt.Sprintf("Schema '%s' version %d does not exist in group '%s'.", name, v, group))
		return
	}
	writeAzureDefinition(w, r, a)
}

// Confluent error codes (Confluent Schema Registry's REST API).
const (
	confluentUnauthorized    = 40101
	confluentSubjectNotFound = 40401
	confluentVersionNotFound = 40402
	confluentSchemaNotFound  = 40403
	confluentNoSubjectConfig = 40408
	confluentInvalidSchema   = 42201
	confluentInvalidVersion  = 42202
	confluentInvalidCompat   = 42203
	confluentBadRequest      = 400
	confluentInternal        = 50001
)

func confluentError(w http.ResponseWriter, status, code int, message string) {
	writeConfluent(w, status, map[string]any{"error_code": code, "message": message})
}

func writeConfluent(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", confluentContentType)
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// confluent wraps a Confluent handler with the basic-auth check.
func (s *Server) confluent(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if want := s.cfg.SchemaRegistryBasicAuth.Reveal(); want != "" {
			user, pass, ok := r.BasicAuth()
			if !ok || subtle.ConstantTimeCompare([]byte(user+":"+pass), []byte(want)) != 1 {
				w.Header().Set("WWW-Authenticate", `Basic realm="ehsink emulator schema registry"`)
				confluentError(w, http.StatusUnauthorized, confluentUnauthorized, "Unauthorized: basic authentication with the schema registry's user and password is required")
				return
			}
		}
		h(w, r)
	}
}

// confluentSchemaRequest is the body of register and lookup.
type confluentSchemaRequest struct {
	Schema     string            `json:"schema"`
	SchemaType string            `json:"schemaType"`
	References []json.RawMessage `json:"references"`
}

// readConfluentSchema reads and checks a register or lookup body; it
// returns false after answering when it is unacceptable.
func readConfluentSchema(w http.ResponseWriter, r *http.Request) (confluentSchemaRequest, bool) {
	var req confluentSchemaRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxSchemaBytes)).Decode(&req); err != nil {
		confluentError(w, http.StatusBadRequest, confluentBadRequest, fmt.Sprintf("the body is not a schema request: %v", err))
		return req, false
	}
	if req.SchemaType == "" {
		req.SchemaType = "AVRO"
	}
	switch {
	case !strings.EqualFold(req.SchemaType, "AVRO"):
		confluentError(w, http.StatusUnprocessableEntity, confluentInvalidSchema, fmt.Sprintf("schemaType %q is not supported by the emulator: only AVRO", req.SchemaType))
		return req, false
	case len(req.References) > 0:
		confluentError(w, http.StatusUnprocessableEntity, confluentInvalidSchema, "schema references are not supported by the emulator")
		return req, false
	}
	req.SchemaType = "AVRO"
	if err := parseAvro(req.Schema); err != nil {
		confluentError(w, http.StatusUnprocessableEntity, confluentInvalidSchema, fmt.Sprintf("Invalid schema: the Avro schema does not parse: %v", err))
		return req, false
	}
	return req, true
}

func (s *Server) confluentRegister(w http.ResponseWriter, r *http.Request) {
	subject := r.PathValue("subject")
	req, ok := readConfluentSchema(w, r)
	if !ok {
		return
	}
	c, created, err := s.schemas.RegisterConfluent(subject, req.SchemaType, req.Schema)
	if err != nil {
		s.log.Error("schema registry: register", "subject", subject, "err", err)
		confluentError(w, http.StatusInternalServerError, confluentInternal, err.Error())
		return
	}
	if created {
		s.log.Debug("confluent schema registered", "subject", subject, "version", c.Version, "id", c.ID)
	}
	writeConfluent(w, http.StatusOK, map[string]int{"id": c.ID})
}

// confluentSubjectVersion is the answer of lookups and version reads.
func confluentSubjectVersion(c schemas.Confluent) map[string]any {
	return map[string]any{"subject": c.Subject, "version": c.Version, "id": c.ID, "schema": c.Schema}
}

func (s *Server) confluentLookup(w http.ResponseWriter, r *http.Request) {
	subject := r.PathValue("subject")
	req, ok := readConfluentSchema(w, r)
	if !ok {
		return
	}
	c, found, known := s.schemas.LookupConfluent(subject, req.SchemaType, req.Schema)
	switch {
	case !known:
		confluentError(w, http.StatusNotFound, confluentSubjectNotFound, fmt.Sprintf("Subject '%s' not found.", subject))
	case !found:
		confluentError(w, http.StatusNotFound, confluentSchemaNotFound, "Schema not found")
	default:
		writeConfluent(w, http.StatusOK, confluentSubjectVersion(c))
	}
}

func (s *Server) confluentSubjects(w http.ResponseWriter, r *http.Request) {
	subjects := s.schemas.Subjects()
	if subjects == nil {
		subjects = []string{}
	}
	writeConfluent(w, http.StatusOK, subjects)
}

func (s *Server) confluentVersions(w http.ResponseWriter, r *http.Request) {
	subject := r.PathValue("subject")
	versions := s.schemas.ConfluentVersions(subject)
	if len(versions) == 0 {
		confluentError(w, http.StatusNotFound, confluentSubjectNotFound, fmt.Sprintf("Subject '%s' not found.", subject))
		return
	}
	writeConfluent(w, http.StatusOK, versions)
}

func (s *Server) confluentVersion(w http.ResponseWriter, r *http.Request) {
	subject, vs := r.PathValue("subject"), r.PathValue("version")
	v := -1
	if vs != "latest" {
		n, err := strconv.Atoi(vs)
		if err != nil || (n < 1 && n != -1) {
			confluentError(w, http.StatusUnprocessableEntity, confluentInvalidVersion,
				fmt.Sprintf("The specified version '%s' is not a valid version id. Allowed values are between [1, 2^31-1] and the string \"latest\"", vs))
			return
		}
		v = n
	}
	c, found, known := s.schemas.ConfluentVersion(subject, v)
	switch {
	case !known:
		confluentError(w, http.StatusNotFound, confluentSubjectNotFound, fmt.Sprintf("Subject '%s' not found.", subject))
	case !found:
		confluentError(w, http.StatusNotFound, confluentVersionNotFound, fmt.Sprintf("Version %s not found.", vs))
	default:
		writeConfluent(w, http.StatusOK, confluentSubjectVersion(c))
	}
}

func (s *Server) confluentByID(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.Atoi(r.PathValue("id"))
	var schema string
	found := false
	if err == nil {
		schema, _, found = s.schemas.ConfluentByID(id)
	}
	if !found {
		confluentError(w, http.StatusNotFound, confluentSchemaNotFound, fmt.Sprintf("Schema %s not found", r.PathValue("id")))
		return
	}
	// schemaType is omitted for AVRO, as Confluent's registry does.
	writeConfluent(w, http.StatusOK, map[string]string{"schema": schema})
}

// confluentCompatibilities are the levels Confluent's registry accepts.
var confluentCompatibilities = []string{"BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE", "NONE"}

func (s *Server) confluentGetConfig(w http.ResponseWriter, r *http.Request) {
	subject := r.PathValue("subject")
	level, ok := s.schemas.SubjectCompatibility(subject)
	if !ok {
		confluentError(w, http.StatusNotFound, confluentNoSubjectConfig, fmt.Sprintf("Subject '%s' does not have subject-level compatibility configured", subject))
		return
	}
	writeConfluent(w, http.StatusOK, map[string]string{"compatibilityLevel": level})
}

func (s *Server) confluentPutConfig(w http.ResponseWriter, r *http.Request) {
	subject := r.PathValue("subject")
	var req struct {
		Compatibility string `json:"compatibility"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxSchemaBytes)).Decode(&req); err != nil {
		confluentError(w, http.StatusBadRequest, confluentBadRequest, fmt.Sprintf("the body is not a config request: %v", err))
		return
	}
	level := strings.ToUpper(req.Compatibility)
	if !slices.Contains(confluentCompatibilities, level) {
		confluentError(w, http.StatusUnprocessableEntity, confluentInvalidCompat,
			fmt.Sprintf("Invalid compatibility level %q: use one of %s", req.Compatibility, strings.Join(confluentCompatibilities, ", ")))
		return
	}
	if err := s.schemas.SetSubjectCompatibility(subject, level); err != nil {
		s.log.Error("schema registry: config", "subject", subject, "err", err)
		confluentError(w, http.StatusInternalServerError, confluentInternal, err.Error())
		return
	}
	writeConfluent(w, http.StatusOK, map[string]string{"compatibility": level})
}
