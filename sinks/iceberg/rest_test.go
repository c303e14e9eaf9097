package iceberg

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ehsink/ehsink/internal/secret"
	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/sinks/sinktest"
)

// TestRESTConformance runs the sink conformance kit with the catalog served
// over the Iceberg REST protocol, through iceberg-go's REST client: OAuth2
// client credentials, the config endpoint's prefix, commits whose
// requirements the catalog refuses with 409 (the kit's two owners).
func TestRESTConformance(t *testing.T) {
	var mu sync.Mutex
	var catalogs []*restCatalog
	sinktest.Run(t, kitHarness(func(t testing.TB) *lake {
		l, rc := restLake(t)
		mu.Lock()
		catalogs = append(catalogs, rc)
		mu.Unlock()
		return l
	}))
	// The kit's two owners of one partition must have met a refusal.
	var refused int64
	for _, rc := range catalogs {
		refused += rc.refused.Load()
	}
	if refused == 0 {
		t.Error("no commit was refused with 409 across the kit: the fencing case did not reach the catalog's requirement check")
	}
}

// TestRESTCommitAnswerLost: the catalog applies a commit and its answer is
// lost (a 503 after the swap, which iceberg-go reports as a commit of
// unknown state). The Flush must find its commit in the table on the next
// attempt and not commit the rows a second time.
func TestRESTCommitAnswerLost(t *testing.T) {
	l, rc := restLake(t)
	s := l.newSink(t, nil)
	ctx := context.Background()
	w := writeTen(t, s)
	var lost atomic.Int32
	rc.setAfterCommit(func() int {
		if lost.CompareAndSwap(0, 1) {
			return http.StatusServiceUnavailable
		}
		return 0
	})
	pos, err := w.Flush(ctx)
	if err != nil {
		t.Fatalf("Flush after a lost answer: %v", err)
	}
	if pos.SequenceNumber != 9 {
		t.Fatalf("position %v, want seq 9", pos)
	}
	if n := lost.Load(); n != 1 {
		t.Fatalf("the answer of %d commits was lost, want 1", n)
	}
	if n := rc.commits.Load(); n != 1 {
		t.Errorf("%d commits applied, want 1 (the lost answer's commit, not a second)", n)
	}
	if got := l.scanSeqs(t)["0"]; !slices.Equal(got, []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}) {
		t.Fatalf("table holds %v, want seq 0..9 once", got)
	}
	// A new owner resumes after it.
	w.Close(ctx)
	_, resume, err := l.newSink(t, nil).Open(ctx, "0")
	if err != nil {
		t.Fatal(err)
	}
	if resume == nil || resume.SequenceNumber != 9 {
		t.Fatalf("resume position %v, want seq 9", resume)
	}
}

// TestRESTRefusalsAndOutages: credentials the catalog refuses fail the
// sink for good (retrying cannot change them), with a message that does
// not show the secret; a catalog that cannot be reached is waited out
// (transient), at start and at a flush.
func TestRESTRefusalsAndOutages(t *testing.T) {
	ctx := context.Background()
	l, rc := restLake(t)

	c := l.config(t)
	c.Catalog.Credential = secret.String(rc.clientID + ":wrong-secret")
	_, err := newIcebergSink(ctx, c, testInfo)
	if err == nil {
		t.Fatal("New with a refused credential succeeded")
	}
	if sinks.IsTransient(err) {
		t.Errorf("refused credential reported transient (retried forever): %v", err)
	}
	if strings.Contains(err.Error(), "wrong-secret") {
		t.Errorf("error shows the secret: %v", err)
	}

	c = l.config(t)
	c.Catalog.Credential = ""
	c.Catalog.Token = secret.String("not-the-token")
	if _, err := newIcebergSink(ctx, c, testInfo); err == nil || sinks.IsTransient(err) {
		t.Errorf("New with a refused bearer token: %v, want a permanent error", err)
	}

	s := l.newSink(t, nil)
	w := writeTen(t, s)
	rc.srv.CloseClientConnections()
	url := rc.url()
	rc.srv.Close() // the catalog is gone
	if _, err := w.Flush(ctx); err == nil || !sinks.IsTransient(err) {
		t.Errorf("Flush with the catalog down: %v, want a transient error", err)
	}
	c = l.config(t)
	c.Catalog.URI = secret.String(url)
	if _, err := newIcebergSink(ctx, c, testInfo); err == nil || !sinks.IsTransient(err) {
		t.Errorf("New with the catalog down: %v, want a transient error", err)
	}
}

// TestRESTWarehouseDir: with a REST catalog, a configured warehouse
// directory is where the table the sink creates is placed.
func TestRESTWarehouseDir(t *testing.T) {
	l, _ := restLake(t)
	dir := filepath.Join(l.dir, "own-warehouse")
	s := l.newSink(t, func(c *sinkConfig) { c.Warehouse.Dir = dir })
	w := writeTen(t, s)
	if _, err := w.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	loc := s.current().Location()
	if !strings.Contains(loc, filepath.ToSlash(dir)) {
		t.Fatalf("table location %s, want under %s", loc, dir)
	}
	var data int
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".parquet") {
			data++
		}
		return nil
	})
	if data == 0 {
		t.Fatalf("no data file under %s", dir)
	}
}
