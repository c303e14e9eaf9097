package iceberg

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ehsink/ehsink/internal/faultproxy"
	"github.com/ehsink/ehsink/internal/secret"
	"github.com/ehsink/ehsink/internal/testenv"
	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/sinks/sinktest"
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

// TestOrphanedCatalogTransactionEnds: writer A reaches a PostgreSQL
// catalog through a fault proxy that goes half-open once the server
// answers A's commit's UPDATE of the table's catalog row, so the server
// holds A's transaction open with the row's lock. Writer B, of another
// sink on the same table reaching the server directly, must still commit:
// the server ends A's orphaned session (the catalog's
// idle_in_transaction_session_timeout). Without it B waits behind the
// lock for as long as the path stays half-open (here, until its flush's
// hang bound). Healed, A commits too, and the table holds every event
// once.
func TestOrphanedCatalogTransactionEnds(t *testing.T) {
	t.Parallel() // it waits on the server's timeout, not on CPU
	ctx := context.Background()
	dsn := testenv.Postgres(t).NewDatabase(t)
	proxied, proxy := testenv.ProxyDSN(t, dsn)
	la := newLake(t)
	la.catalogDSN = proxied
	lb := &lake{dir: la.dir, catalogDSN: dsn}
	a := la.newSink(t, nil)
	b := lb.newSink(t, nil)
	wa := writeTen(t, a)
	wb, _, err := b.Open(ctx, "1")
	if err != nil {
		t.Fatal(err)
	}
	if err := wb.Write(ctx, sinktest.Events("1", 0, 9)); err != nil {
		t.Fatal(err)
	}

	proxy.Set(faultproxy.Fault{BlackholeOnReply: []byte("UPDATE 1")})
	aDone := make(chan error, 1)
	actx, cancelA := context.WithCancel(ctx)
	defer cancelA()
	go func() {
		_, err := wa.Flush(actx)
		aDone <- err
	}()
	select {
	case <-proxy.Triggered():
	case err := <-aDone:
		t.Fatalf("A's flush ended before its catalog UPDATE was answered: %v", err)
	case <-time.After(30 * time.Second): // a hang bound, not a speed assertion
		t.Fatal("A's commit never updated the catalog row")
	}

	cut := time.Now()
	bctx, cancelB := context.WithTimeout(ctx, 60*time.Second) // a hang bound
	pos, err := wb.Flush(bctx)
	cancelB()
	t.Logf("B committed %s after A's catalog UPDATE was answered and its path went half-open", time.Since(cut).Round(100*time.Millisecond))
	if err != nil {
		t.Fatalf("B's flush while A's catalog transaction is orphaned: %v (the row's lock was never freed)", err)
	}
	if pos == nil || pos.SequenceNumber != 9 {
		t.Fatalf("B's flush: watermark %v, want seq 9", pos)
	}

	proxy.Heal()
	cancelA()
	<-aDone
	for range 3 { // the first tries may meet the ended session
		var pos *sinks.Position
		if pos, err = wa.Flush(ctx); err == nil {
			if pos == nil || pos.SequenceNumber != 9 {
				t.Fatalf("A's flush after the heal: watermark %v, want seq 9", pos)
			}
			break
		}
	}
	if err != nil {
		t.Fatalf("A's flush after the heal: %v", err)
	}
	got := la.scanSeqs(t)
	want := []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	for _, p := range []string{"0", "1"} {
		slices.Sort(got[p])
		if !slices.Equal(got[p], want) {
			t.Fatalf("partition %s holds %v, want seq 0..9 once each", p, got[p])
		}
	}
}
