package connector

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAutoColumnsKeepDroppedFields: a connector with columns: auto that
// starts after a version dropped a field (a replica started again once
// v3 dropped note) derives the newest version's columns and then those
// only older versions have, so note keeps its column in whatever that
// process writes; an older version whose columns cannot be derived (a
// field named seq) adds nothing.
func TestAutoColumnsKeepDroppedFields(t *testing.T) {
	record := func(fields ...string) string {
		return `{"type":"record","name":"Order","fields":[{"name":"id","type":"long"}` + strings.Join(append([]string{""}, fields...), ",") + `]}`
	}
	f := func(name string) string {
		return fmt.Sprintf(`{"name":%q,"type":["null","string"],"default":null}`, name)
	}
	versions := map[string]string{
		"1": record(f("note")),
		"2": record(f("note"), f("seq")),
		"3": record(f("channel")),
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, ok := strings.CutPrefix(r.URL.Path, "/subjects/orders-value/versions")
		switch {
		case ok && v == "":
			_, _ = w.Write([]byte("[3,1,2]"))
		case ok && versions[strings.TrimPrefix(v, "/")] != "":
			_ = json.NewEncoder(w).Encode(map[string]string{"schema": versions[strings.TrimPrefix(v, "/")]})
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "connectors.yaml")
	if err := os.WriteFile(path, []byte(`
connectors:
  - name: orders
    source: {connection: "Endpoint=sb://ns.example/;SharedAccessKeyName=k;SharedAccessKey=v;EntityPath=orders", format: avro,
      registry: {type: confluent, url: "`+srv.URL+`", subject: orders-value}}
    sink: {type: parquet, dir: `+filepath.Dir(path)+`, columns: auto}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(path, LoadOptions{Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	spec := cfg.Connectors[0]
	dec, err := newDecoder(spec, spec.Source.Connection, nil)
	if err != nil {
		t.Fatal(err)
	}
	d, err := deriveAtStart(t.Context(), spec, dec, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(d.cols.Names(), ","), "partition,seq,enqueued_at,id,channel,note"; got != want {
		t.Errorf("columns %s, want %s", got, want)
	}
}
