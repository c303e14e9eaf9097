package iceberg

import (
	"database/sql"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/apache/iceberg-go/table"
)

// restCatalog serves the Iceberg REST catalog protocol (the endpoints the
// sink uses: config, OAuth2 client credentials, namespaces, tables and
// commits) in front of iceberg-go's sql catalog on a SQLite file. The
// sink's side of these tests is iceberg-go's REST client, as with
// Polaris, Lakekeeper or Unity; this server only translates, the catalog
// behind it applies the requirements and updates of each commit.
type restCatalog struct {
	t      testing.TB
	srv    *httptest.Server
	cat    *sqlcat.Catalog
	prefix string // the config endpoint's prefix override
	// clientID and secret are the OAuth2 client credential exchanged for
	// token, the bearer token every other request must carry.
	clientID, secret, token string

	mu sync.Mutex
	// afterCommit, when set, is called after a commit was applied and
	// before it is answered; it may replace the answer (a lost answer).
	afterCommit func() (status int)
	commits     atomic.Int64
	// commitDelay is how long each commit waits before it is applied: a
	// remote catalog's round trip and work.
	commitDelay time.Duration
	refused     atomic.Int64 // commits answered 409
}

// newRESTCatalog starts a REST catalog on a SQLite catalog at dbPath whose
// tables go under the warehouse directory.
func newRESTCatalog(t testing.TB, dbPath, warehouse string) *restCatalog {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+dbPath+"?_pragma=busy_timeout(30000)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	cat, err := sqlcat.NewCatalog("rest-test", db, sqlcat.SQLite, ice.Properties{
		"warehouse":           "file://" + filepath.ToSlash(warehouse),
		"init_catalog_tables": "true",
	})
	if err != nil {
		t.Fatal(err)
	}
	rc := &restCatalog{t: t, cat: cat, prefix: "lakehouse", clientID: "ehsink", secret: "s3cret", token: "ehsink-test-token"}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/config", rc.config)
	mux.HandleFunc("POST /v1/oauth/tokens", rc.oauth)
	p := "/v1/" + rc.prefix
	mux.HandleFunc("POST "+p+"/namespaces", rc.authed(rc.createNamespace))
	mux.HandleFunc("GET "+p+"/namespaces/{ns}", rc.authed(rc.loadNamespace))
	mux.HandleFunc("HEAD "+p+"/namespaces/{ns}", rc.authed(rc.loadNamespace))
	mux.HandleFunc("POST "+p+"/namespaces/{ns}/tables", rc.authed(rc.createTable))
	mux.HandleFunc("GET "+p+"/namespaces/{ns}/tables/{table}", rc.authed(rc.loadTable))
	mux.HandleFunc("HEAD "+p+"/namespaces/{ns}/tables/{table}", rc.authed(rc.loadTable))
	mux.HandleFunc("POST "+p+"/namespaces/{ns}/tables/{table}", rc.authed(rc.commit))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("REST catalog: unexpected %s %s", r.Method, r.URL.Path)
		restError(w, http.StatusNotFound, "NotFoundException", "no route "+r.URL.Path)
	})
	rc.srv = httptest.NewServer(mux)
	t.Cleanup(func() {
		rc.srv.Close()
		_ = db.Close()
	})
	return rc
}

func (rc *restCatalog) url() string { return rc.srv.URL }

func restError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": status}})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(v); err != nil {
		panic(err)
	}
}

func (rc *restCatalog) config(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, map[string]any{"defaults": map[string]string{}, "overrides": map[string]string{"prefix": rc.prefix}})
}

func (rc *restCatalog) oauth(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		restError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	if r.PostForm.Get("grant_type") != "client_credentials" || r.PostForm.Get("client_id") != rc.clientID || r.PostForm.Get("client_secret") != rc.secret {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "invalid_client", "error_description": "unknown client"})
		return
	}
	writeJSON(w, map[string]any{"access_token": rc.token, "token_type": "bearer", "expires_in": 3600, "issued_token_type": "urn:ietf:params:oauth:token-type:access_token"})
}

func (rc *restCatalog) authed(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+rc.token {
			restError(w, http.StatusUnauthorized, "NotAuthorizedException", "bad or missing bearer token")
			return
		}
		h(w, r)
	}
}

// namespace is the path's namespace, its levels joined by the unit
// separator as the protocol has it.
func namespace(r *http.Request) table.Identifier {
	return strings.Split(r.PathValue("ns"), "\x1f")
}

func (rc *restCatalog) createNamespace(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Namespace  []string       `json:"namespace"`
		Properties ice.Properties `json:"properties"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		restError(w, http.StatusBadRequest, "BadRequestException", err.Error())
		return
	}
	if err := rc.cat.CreateNamespace(r.Context(), req.Namespace, req.Properties); err != nil {
		rc.fail(w, err)
		return
	}
	writeJSON(w, req)
}

func (rc *restCatalog) loadNamespace(w http.ResponseWriter, r *http.Request) {
	props, err := rc.cat.LoadNamespaceProperties(r.Context(), namespace(r))
	if err != nil {
		rc.fail(w, err)
		return
	}
	writeJSON(w, map[string]any{"namespace": namespace(r), "properties": props})
}

func (rc *restCatalog) createTable(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Name          string                    `json:"name"`
		Schema        *ice.Schema               `json:"schema"`
		Location      string                    `json:"location"`
		PartitionSpec *ice.UnboundPartitionSpec `json:"partition-spec"`
		Properties    ice.Properties            `json:"properties"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		restError(w, http.StatusBadRequest, "BadRequestException", err.Error())
		return
	}
	opts := []catalog.CreateTableOpt{catalog.WithProperties(req.Properties)}
	if req.PartitionSpec != nil {
		opts = append(opts, catalog.WithPartitionSpec(&req.PartitionSpec.PartitionSpec))
	}
	if req.Location != "" {
		opts = append(opts, catalog.WithLocation(req.Location))
	}
	tbl, err := rc.cat.CreateTable(r.Context(), append(namespace(r), req.Name), req.Schema, opts...)
	if err != nil {
		rc.fail(w, err)
		return
	}
	writeJSON(w, map[string]any{"metadata-location": tbl.MetadataLocation(), "metadata": tbl.Metadata()})
}

func (rc *restCatalog) loadTable(w http.ResponseWriter, r *http.Request) {
	tbl, err := rc.cat.LoadTable(r.Context(), append(namespace(r), r.PathValue("table")))
	if err != nil {
		rc.fail(w, err)
		return
	}
	writeJSON(w, map[string]any{"metadata-location": tbl.MetadataLocation(), "metadata": tbl.Metadata()})
}

func (rc *restCatalog) commit(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Requirements table.Requirements `json:"requirements"`
		Updates      table.Updates      `json:"updates"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		restError(w, http.StatusBadRequest, "BadRequestException", err.Error())
		return
	}
	time.Sleep(rc.commitDelay)
	meta, loc, err := rc.cat.CommitTable(r.Context(), append(namespace(r), r.PathValue("table")), req.Requirements, req.Updates)
	if err != nil {
		rc.fail(w, err)
		return
	}
	rc.commits.Add(1)
	rc.mu.Lock()
	after := rc.afterCommit
	rc.mu.Unlock()
	if after != nil {
		if status := after(); status != 0 {
			restError(w, status, "ServiceUnavailableException", "answer lost after the commit was applied")
			return
		}
	}
	writeJSON(w, map[string]any{"metadata-location": loc, "metadata": meta})
}

// fail answers a catalog error with the status and type the protocol
// gives it.
func (rc *restCatalog) fail(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, catalog.ErrNoSuchNamespace):
		restError(w, http.StatusNotFound, "NoSuchNamespaceException", err.Error())
	case errors.Is(err, catalog.ErrNoSuchTable):
		restError(w, http.StatusNotFound, "NoSuchTableException", err.Error())
	case errors.Is(err, catalog.ErrNamespaceAlreadyExists):
		restError(w, http.StatusConflict, "AlreadyExistsException", err.Error())
	case errors.Is(err, catalog.ErrTableAlreadyExists):
		restError(w, http.StatusConflict, "AlreadyExistsException", err.Error())
	case lostRace(err): // a REST catalog answers a lost race 409
		rc.refused.Add(1)
		restError(w, http.StatusConflict, "CommitFailedException", err.Error())
	default:
		restError(w, http.StatusInternalServerError, "ServerError", err.Error())
	}
}

// restLake is a lake whose catalog is served over REST.
func restLake(t testing.TB) (*lake, *restCatalog) {
	t.Helper()
	l := newLake(t)
	l.rest = newRESTCatalog(t, filepath.Join(l.dir, "rest-catalog.db"), l.warehousePath())
	return l, l.rest
}

func (rc *restCatalog) setAfterCommit(f func() int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.afterCommit = f
}
