package iceberg

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ehsink/ehsink/internal/faultproxy"
	"github.com/ehsink/ehsink/internal/secret"
	"github.com/ehsink/ehsink/internal/testenv"
	"github.com/ehsink/ehsink/sinks"
)

// TestCatalogOutageIsWaitedOut cuts a PostgreSQL catalog off (every
// connection reset) and checks that New, Open and Flush fail with errors
// marked transient, which the runner waits out, and not with errors that
// fail the connector (the chaos matrix's Iceberg connector stopped for
// good when its replica started, or claimed a partition, while PostgreSQL
// was down). Healed, the same writer commits. A login the server refuses
// stays permanent.
func TestCatalogOutageIsWaitedOut(t *testing.T) {
	ctx := context.Background()
	dsn := testenv.Postgres(t).NewDatabase(t)
	proxied, proxy := testenv.ProxyDSN(t, dsn)
	l := newLake(t)
	l.catalogDSN = proxied
	s := l.newSink(t, nil)
	w := writeTen(t, s)

	proxy.Set(faultproxy.Fault{Reset: true})
	wantTransient := func(what string, err error) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s with the catalog cut off: no error", what)
		}
		if !sinks.IsTransient(err) {
			t.Fatalf("%s with the catalog cut off: %v, not marked transient: the runner would fail the connector", what, err)
		}
	}
	cfg := l.config(t)
	ctxNew, cancel := context.WithTimeout(ctx, 30*time.Second)
	_, err := newIcebergSink(ctxNew, cfg, testInfo)
	cancel()
	wantTransient("New", err)
	_, _, err = s.Open(ctx, "1")
	wantTransient("Open", err)
	_, err = w.Flush(ctx)
	wantTransient("Flush", err)

	proxy.Heal()
	pos, err := w.Flush(ctx)
	if err != nil {
		t.Fatalf("Flush after the catalog is back: %v", err)
	}
	if pos == nil || pos.SequenceNumber != 9 {
		t.Fatalf("Flush after the catalog is back: watermark %v, want seq 9", pos)
	}
	if got := l.scanSeqs(t); len(got["0"]) != 10 {
		t.Fatalf("table holds %v for partition 0, want seq 0..9 once each", got)
	}

	// A database the server does not have is permanent: waiting does
	// not create it.
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/no_such_database"
	cfg.Catalog.URI = secret.String(u.String())
	_, err = newIcebergSink(ctx, cfg, testInfo)
	var pgErr *pgconn.PgError
	if err == nil || sinks.IsTransient(err) || !errors.As(err, &pgErr) {
		t.Fatalf("New on a database that does not exist: %v; want a permanent PostgreSQL refusal", err)
	}
}
