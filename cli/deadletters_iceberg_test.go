package cli

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/catalog"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/apache/iceberg-go/table"

	"github.com/ehsink/ehsink/internal/connector"
)

// icebergLetterConfig is a connector reading the emulator at listen into
// an Iceberg table of a SQLite catalog in dir; qty is the mapping's qty
// type (the table's field is long) and extra more connector keys.
func icebergLetterConfig(dir, listen, qty, extra string) string {
	return `
drain_timeout: 5s
emulator: {listen: ` + listen + `, hubs: {orders: 1}}
connectors:
  - name: orders
    source: {connection: emulator, eventhub: orders, batch: {max_events: 10, max_wait: 100ms}}
    checkpoint: {file: {dir: ` + filepath.Join(dir, "checkpoints") + `}}` + extra + `
    sink:
      type: iceberg
      catalog: {type: sql, driver: sqlite, uri: ` + filepath.Join(dir, "catalog.db") + `}
      warehouse: {dir: ` + filepath.Join(dir, "warehouse") + `}
      namespace: lake
      table: orders
      max_age: 200ms
      columns:
        id: {from: $.id, nullable: false}
        qty: {from: $.qty, type: ` + qty + `}
        seq: {from: "@sequence_number", type: int64}
`
}

// icebergRows reads table of the lake in dir with iceberg-go's scan: the
// columns of each row joined by |, ordered by the first column's text.
func icebergRows(t *testing.T, ctx context.Context, dir, name string, cols ...string) []string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "catalog.db")+"?_pragma=busy_timeout(30000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cat, err := sqlcat.NewCatalog("ehsink", db, sqlcat.SQLite, nil)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := cat.LoadTable(ctx, catalog.ToIdentifier("lake", name))
	if err != nil {
		t.Fatalf("load table %s: %v", name, err)
	}
	if tbl.CurrentSnapshot() == nil {
		return nil
	}
	_, itr, err := tbl.Scan(table.WithSelectedFields(cols...)).ToArrowRecords(ctx)
	if err != nil {
		t.Fatalf("scan %s: %v", name, err)
	}
	var out []string
	for rec, err := range itr {
		if err != nil {
			t.Fatalf("scan %s: %v", name, err)
		}
		for i := range int(rec.NumRows()) {
			var vals []string
			for _, c := range cols {
				vals = append(vals, rec.Column(rec.Schema().FieldIndices(c)[0]).ValueStr(i))
			}
			out = append(out, strings.Join(vals, "|"))
		}
		rec.Release()
	}
	slices.Sort(out)
	return out
}

// TestDeadLettersReplayIceberg is TestDeadLettersReplayAfterTheFix on the
// Iceberg sink: a real run whose mapping refuses events (a qty beyond
// the int32 it was mapped as, though the table's field is long; an event
// without its id) leaves rows and letters in the dead-letter table; with
// the corrected config, list counts them, show prints one by its ID (the
// event's partition and sequence number), a dry run writes nothing, a
// replay cancelled after its first letter and a replay of all leave
// exactly the rows a correct first run makes, and a replay run again
// writes nothing.
func TestDeadLettersReplayIceberg(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	listen := freeAddr(t)
	first := writeIn(t, dir, "first.yaml", icebergLetterConfig(dir, listen, "int32", ""))
	fixed := writeIn(t, dir, "fixed.yaml", icebergLetterConfig(dir, listen, "int64", `
    filter: {drop: "$.test == true"}`))
	events := writeIn(t, dir, "events.jsonl", strings.Join([]string{
		`{"id":"o-1","qty":1}`,
		`{"id":"o-2","qty":3000000000}`,
		`{"id":"o-3","qty":3}`,
		`{"id":"o-4","qty":4000000000}`,
		`{"qty":5}`,
		`{"id":"t-1","qty":5000000000,"test":true}`,
		`{"id":"o-7","qty":7}`,
	}, "\n")+"\n")
	rows := func() []string { return icebergRows(t, ctx, dir, "orders", "seq", "id", "qty") }
	dlRows := func() int { return len(icebergRows(t, ctx, dir, "orders_dead_letters", "sequence_number")) }

	// The corrected config's sink makes the table (qty long) before the
	// first run, whose int32 column fits it.
	if code, out, stderr := cli(t, "deadletters", "list", "-c", fixed); code != exitOK || !strings.Contains(out, "no dead letters") {
		t.Fatalf("list before the run: exit %d\n%s%s", code, out, stderr)
	}
	firstRun(t, ctx, first, listen, []string{"--file", events}, "3 rows and 4 dead letters", func() bool {
		return len(rows()) == 3 && dlRows() == 4
	})

	code, out, stderr := cli(t, "deadletters", "list", "-c", fixed)
	t.Logf("list:\n%s", out)
	if code != exitOK || !strings.Contains(out, "4 letter(s)") || strings.Count(out, "out of range for int32") != 3 || !strings.Contains(out, `column "id"`) {
		t.Fatalf("list: exit %d\n%s%s\nwant 4 letters: 3 qtys beyond int32, 1 missing id", code, out, stderr)
	}
	const letter1 = 1000000000001 // partition 0 (plus one), sequence number 1
	code, out, stderr = cli(t, "deadletters", "show", "-c", fixed, fmt.Sprint(letter1))
	t.Logf("show:\n%s", out)
	for _, want := range []string{"letter 1000000000001 (connector orders, table lake.orders)", "sequence number: 1", `"id": "o-2"`, "body (json"} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Fatalf("show: exit %d\n%s%s\nwant %q", code, out, stderr, want)
		}
	}

	want := []string{"0|o-1|1", "1|o-2|3000000000", "2|o-3|3", "3|o-4|4000000000", "6|o-7|7"}
	replayTheFix(t, ctx, fixed, rows, want, func() bool { return dlRows() != 4 })

	code, out, _ = cli(t, "deadletters", "replay", "-c", fixed, "--id", fmt.Sprint(letter1), "--id", "1000000000004")
	if code != exitFailure || !strings.Contains(out, "1 letter(s): 0 replayed, 0 dropped by the filter, 1 failed again") {
		t.Fatalf("second replay: exit %d\n%s", code, out)
	}
	if got := rows(); !reflect.DeepEqual(got, want) {
		t.Fatalf("the second replay wrote: %q", got)
	}
	code, out, _ = cli(t, "deadletters", "list", "-c", fixed, "--replayed")
	var replayed int
	for _, line := range strings.Split(out, "\n")[1:] {
		if f := strings.Fields(line); len(f) > 3 && f[0] == "orders" {
			var n int
			fmt.Sscan(f[3], &n)
			replayed += n
		}
	}
	if code != exitOK || !strings.Contains(out, "4 letter(s)") || replayed != 3 {
		t.Fatalf("list --replayed: exit %d\n%s\nwant 4 letters, 3 of them replayed", code, out)
	}
	cfg, err := connector.Load(fixed, connector.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rev := cfg.Connectors[0].Revision()
	code, out, _ = cli(t, "deadletters", "show", "-c", fixed, "1000000000004")
	if want := "revision:        " + rev + " (the file's now: " + rev + ")"; code != exitOK || !strings.Contains(out, want) {
		t.Fatalf("show of the letter that failed again: exit %d\n%s\nwant %q: its newer version", code, out, want)
	}
}

// replayTheFix runs the replays of the test events' letters with the
// corrected config: a dry run says what would happen (2 letters replayed,
// 1 dropped by the filter, 1 failing again) and writes nothing (neither
// rows nor what dryRunWrote looks for); a replay cancelled once it has
// reported its first letter writes that letter's row; a replay of all then
// leaves the rows want, what a correct first run writes.
func replayTheFix(t *testing.T, ctx context.Context, fixed string, rows func() []string, want []string, dryRunWrote func() bool) {
	t.Helper()
	code, out, _ := cli(t, "deadletters", "replay", "-c", fixed, "--dry-run")
	t.Logf("replay --dry-run:\n%s", out)
	if code != exitFailure || !strings.Contains(out, "4 letter(s): 2 would be replayed (dry run: nothing written), 1 dropped by the filter, 1 failed again") {
		t.Fatalf("dry run: exit %d\n%s\nwant 2 replayed, 1 dropped, 1 failed again (exit 1)", code, out)
	}
	if got := rows(); len(got) != 3 || dryRunWrote() {
		t.Fatalf("the dry run wrote: rows %q", got)
	}
	replayCancelledAfterOne(t, ctx, fixed)
	if got := rows(); len(got) != 4 {
		t.Fatalf("the cancelled replay left %q, want the first letter's row written", got)
	}
	code, out, _ = cli(t, "deadletters", "replay", "-c", fixed)
	t.Logf("replay:\n%s", out)
	if code != exitFailure || !strings.Contains(out, "3 letter(s): 1 replayed, 1 dropped by the filter, 1 failed again") {
		t.Fatalf("replay: exit %d\n%s", code, out)
	}
	if got := rows(); !reflect.DeepEqual(got, want) {
		t.Fatalf("after the replay the table holds %q, want what a correct first run writes %q", got, want)
	}
}
