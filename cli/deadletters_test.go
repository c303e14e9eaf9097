package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ehsink/ehsink/internal/connector"
	"github.com/ehsink/ehsink/internal/deadletters"
	"github.com/ehsink/ehsink/internal/testenv"
	"github.com/ehsink/ehsink/sinks"
)

// deadLetterConfig is a connector reading the emulator at listen into
// PostgreSQL; amount is the mapping's amount type and extra more
// connector keys.
func deadLetterConfig(dir, listen, dsn, amount, extra string) string {
	return emulatorConnector(dir, listen, extra) + `
      type: postgres
      dsn: "` + dsn + `"
      table: public.orders
      columns:
        id: {from: $.id, nullable: false}
        amount: {from: $.amount, type: "` + amount + `"}
        seq: {from: "@sequence_number", type: bigint}
`
}

// TestDeadLettersReplayAfterTheFix: a real run whose mapping refuses
// some events (amounts beyond numeric(4,2), an event without its required
// id) leaves rows and dead letters; the config is then corrected (the
// amount widened, test events filtered out). list counts the letters by
// partition and reason; show prints one with its JSON body and the
// revision that refused it; a dry run says what would happen and writes
// nothing; a replay cancelled after its first letter, then a replay of
// all, leave exactly the rows a correct first run makes, with the
// filtered letter marked and the letter without an id left with its new
// revision; a second replay (of the replayed letter and the id-less one,
// by --id) writes nothing.
func TestDeadLettersReplayAfterTheFix(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	dsn := testenv.Postgres(t).NewDatabase(t)
	db, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.WithoutCancel(ctx))
	if _, err := db.Exec(ctx, `CREATE TABLE public.orders (id text NOT NULL, amount numeric(7,2), seq bigint)`); err != nil {
		t.Fatal(err)
	}
	listen := freeAddr(t)
	first := writeIn(t, dir, "first.yaml", deadLetterConfig(dir, listen, dsn, "numeric(4,2)", ""))
	fixed := writeIn(t, dir, "fixed.yaml", deadLetterConfig(dir, listen, dsn, "numeric(7,2)", `
    filter: {drop: "$.test == true"}`))
	events := amountEvents(t, dir)

	count := func(q string) int {
		t.Helper()
		var n int
		if err := db.QueryRow(ctx, q).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	rows := func() []string {
		t.Helper()
		r, err := db.Query(ctx, `SELECT concat_ws('|', id, amount, seq) FROM public.orders ORDER BY seq`)
		if err != nil {
			t.Fatal(err)
		}
		out, err := pgx.CollectRows(r, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return out
	}

	firstRun(t, ctx, first, listen, []string{"--file", events}, "3 rows and 4 dead letters", func() bool {
		return count(`SELECT count(*) FROM public.orders`) == 3 && count(`SELECT count(*) FROM ehsink_dead_letters`) == 4
	})
	revFirst, revFixed := revisionOf(t, first), revisionOf(t, fixed)

	code, out, stderr := cli(t, "deadletters", "list", "-c", fixed)
	t.Logf("list:\n%s", out)
	if code != exitOK || !strings.Contains(out, "4 letter(s)") || strings.Count(out, "does not fit") != 3 || !strings.Contains(out, `column "id"`) {
		t.Fatalf("list: exit %d\n%s%s\nwant 4 letters: 3 amounts that do not fit, 1 missing id", code, out, stderr)
	}
	var id int64
	if err := db.QueryRow(ctx, `SELECT id FROM ehsink_dead_letters WHERE sequence_number = 1`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	code, out, stderr = cli(t, "deadletters", "show", "-c", fixed, fmt.Sprint(id))
	t.Logf("show:\n%s", out)
	for _, want := range []string{"sequence number: 1", `"id": "o-2"`, "body (json", "revision:        " + revFirst + " (the file's now: " + revFixed + ")"} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Fatalf("show: exit %d\n%s%s\nwant %q", code, out, stderr, want)
		}
	}

	code, out, _ = cli(t, "deadletters", "replay", "-c", fixed, "--dry-run")
	t.Logf("replay --dry-run:\n%s", out)
	if code != exitFailure || !strings.Contains(out, "4 letter(s): 2 would be replayed (dry run: nothing written), 1 dropped by the filter, 1 failed again") {
		t.Fatalf("dry run: exit %d\n%s\nwant 2 replayed, 1 dropped, 1 failed again (exit 1)", code, out)
	}
	if got := rows(); len(got) != 3 || count(`SELECT count(*) FROM ehsink_dead_letters WHERE replayed_at IS NULL`) != 4 {
		t.Fatalf("the dry run wrote: rows %q", got)
	}

	// A replay cancelled (as by Ctrl-C) once it has reported its first
	// letter; then a replay of all.
	replayCancelledAfterOne(t, ctx, fixed)
	if got := rows(); len(got) != 4 {
		t.Fatalf("the cancelled replay left %q, want the first letter's row written", got)
	}
	code, out, _ = cli(t, "deadletters", "replay", "-c", fixed)
	t.Logf("replay:\n%s", out)
	if code != exitFailure || !strings.Contains(out, "3 letter(s): 1 replayed, 1 dropped by the filter, 1 failed again") {
		t.Fatalf("replay: exit %d\n%s", code, out)
	}
	want := []string{"o-1|12.50|0", "o-2|1234.50|1", "o-3|3.00|2", "o-4|99999.99|3", "o-7|7.00|6"}
	if got := rows(); !reflect.DeepEqual(got, want) {
		t.Fatalf("after the replay the table holds %q, want what a correct first run writes %q", got, want)
	}
	var rev string
	if err := db.QueryRow(ctx, `SELECT config_revision FROM ehsink_dead_letters WHERE replayed_at IS NULL`).Scan(&rev); err != nil || rev != revFixed {
		t.Fatalf("the letter left: revision %q (%v), want %s, the one that refused it again", rev, err, revFixed)
	}

	var idLess int64
	if err := db.QueryRow(ctx, `SELECT id FROM ehsink_dead_letters WHERE replayed_at IS NULL`).Scan(&idLess); err != nil {
		t.Fatal(err)
	}
	code, out, _ = cli(t, "deadletters", "replay", "-c", fixed, "--id", fmt.Sprint(id), "--id", fmt.Sprint(idLess))
	if code != exitFailure || !strings.Contains(out, "1 letter(s): 0 replayed, 0 dropped by the filter, 1 failed again") {
		t.Fatalf("second replay: exit %d\n%s", code, out)
	}
	if got := rows(); !reflect.DeepEqual(got, want) {
		t.Fatalf("the second replay wrote: %q", got)
	}
}

// emulatorConnector is a config whose connector orders reads hub orders
// of the emulator at listen, checkpointed under dir, with extra
// connector keys, up to its sink key: the sink's block follows.
func emulatorConnector(dir, listen, extra string) string {
	return `
drain_timeout: 5s
emulator: {listen: ` + listen + `, hubs: {orders: 1}}
connectors:
  - name: orders
    source: {connection: emulator, eventhub: orders, batch: {max_events: 10, max_wait: 100ms}}
    checkpoint: {file: {dir: ` + filepath.Join(dir, "checkpoints") + `}}` + extra + `
    sink:`
}

// freeAddr returns a loopback address no one listens on (for the
// emulator of a config).
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// firstRun runs the config at path, whose emulator listens at listen,
// sends the events `ehsink send` args name, and stops the run once done
// (what) holds.
func firstRun(t *testing.T, ctx context.Context, path, listen string, args []string, what string, done func() bool) {
	t.Helper()
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	var logs bytes.Buffer
	exited := make(chan int, 1)
	go func() { exited <- dispatch(runCtx, []string{"run", "-c", path}, io.Discard, &logs) }()
	waitFor(t, ctx, exited, "the emulator listening", func() bool {
		c, err := net.Dial("tcp", listen)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	if code, _, stderr := cli(t, append([]string{"send", "-c", path}, args...)...); code != exitOK {
		t.Fatalf("send: exit %d: %s", code, stderr)
	}
	waitFor(t, ctx, exited, what, done)
	stopRun()
	if code := <-exited; code != exitOK {
		t.Fatalf("run: exit %d:\n%s", code, logs.String())
	}
}

// revisionOf returns the configuration revision of the first connector
// of the file at path.
func revisionOf(t *testing.T, path string) string {
	t.Helper()
	cfg, err := connector.Load(path, connector.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Connectors[0].Revision()
}

// replayCancelledAfterOne runs `ehsink deadletters replay -c path`,
// cancelled (as by Ctrl-C) once it has reported its first letter.
func replayCancelledAfterOne(t *testing.T, ctx context.Context, path string) {
	t.Helper()
	cctx, cancelReplay := context.WithCancel(ctx)
	defer cancelReplay()
	var errOut bytes.Buffer
	stopped := &cancelOnWrite{w: &bytes.Buffer{}, cancel: cancelReplay}
	if code := dispatch(cctx, []string{"deadletters", "replay", "-c", path}, stopped, &errOut); code != exitFailure || !strings.Contains(errOut.String(), "context canceled") {
		t.Fatalf("cancelled replay: exit %d, stderr %s; want 1 and the cancellation", code, errOut.String())
	}
}

// cancelOnWrite cancels a command's context at its first line of output.
type cancelOnWrite struct {
	w      io.Writer
	cancel context.CancelFunc
}

func (c *cancelOnWrite) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte("\n")) {
		c.cancel()
	}
	return c.w.Write(p)
}

// writeFile writes text to dir/name and returns its path.
// writeIn writes text to a file name in dir (writeFile) and returns its path.
func writeIn(t *testing.T, dir, name, text string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	writeFile(t, path, text)
	return path
}

// waitFor polls cond until it holds, failing when the run ends first or
// ctx does.
func waitFor(t *testing.T, ctx context.Context, done <-chan int, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case code := <-done:
			t.Fatalf("run exited %d while waiting for %s", code, what)
		case <-ctx.Done():
			t.Fatalf("gave up waiting for %s", what)
		case <-tick.C:
		}
	}
}

// TestDeadLettersFiles: the letters the runner stores in files for a sink
// that keeps none (stdout) are listed and shown, body decoded, revision
// read back; replay refuses them, saying why, and refuses Avro letters of
// the built-in emulator's registry, naming the operations API's action.
func TestDeadLettersFiles(t *testing.T) {
	dir := t.TempDir()
	dead := filepath.Join(dir, "dead")
	path := writeIn(t, dir, "connectors.yaml", `
connectors:
  - name: lines
    source: {connection: "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=${EH_KEY};EntityPath=orders"}
    errors: {dead_letter: {dir: `+dead+`}}
    sink: {type: stdout, columns: {id: $.id}}
`)
	store, err := connector.NewFileDeadLetters(dead)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	letters := []sinks.DeadLetter{
		{Event: sinks.Event{Partition: "1", SequenceNumber: 7, Offset: "70", Body: []byte(`{"id":[1]}`)}, Reason: `column "id": not a string`, FailedAt: at},
		{Event: sinks.Event{Partition: "1", SequenceNumber: 9, Offset: "90", Body: []byte{0xff, 0x00}}, Reason: "invalid JSON", FailedAt: at},
	}
	if err := store.Store(deadletters.WithRevision(t.Context(), "0123456789ab"), "1", -1, letters); err != nil {
		t.Fatal(err)
	}

	code, out, stderr := cli(t, "deadletters", "list", "-c", path)
	if code != exitOK || !strings.Contains(out, "2 letter(s)") || !strings.Contains(out, "invalid JSON") {
		t.Fatalf("list: exit %d\n%s%s", code, out, stderr)
	}
	code, out, stderr = cli(t, "deadletters", "show", "-c", path, "1000000002") // partition 1, its second letter
	for _, want := range []string{"sequence number: 9", "body (base64, 2 bytes):\n/wA=", "revision:        0123456789ab"} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Fatalf("show: exit %d\n%s%s\nwant %q", code, out, stderr, want)
		}
	}
	code, _, stderr = cli(t, "deadletters", "replay", "-c", path)
	if code != exitFailure || !strings.Contains(stderr, "replay is not supported") {
		t.Fatalf("replay: exit %d, stderr %s; want 1 and the refusal", code, stderr)
	}

	// Avro letters are decoded with the connector's registry: the built-in
	// emulator's is in the process that runs it.
	avroPath := writeIn(t, dir, "avro.yaml", `
emulator: {hubs: {orders: 1}}
connectors:
  - name: lines
    source: {connection: emulator, eventhub: orders, format: avro, registry: {type: azure}}
    errors: {dead_letter: {dir: `+dead+`}}
    sink: {type: stdout, columns: {id: $.id}}
`)
	code, _, stderr = cli(t, "deadletters", "replay", "-c", avroPath)
	if code != exitFailure || !strings.Contains(stderr, "POST /v1/connectors/lines/deadletters/replay") {
		t.Fatalf("replay of Avro letters of the emulator's registry: exit %d, stderr %s; want 1 and the operations API named", code, stderr)
	}
}

// TestDeadLettersUsage: the commands' bad usages exit 2 with a message.
func TestDeadLettersUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"deadletters"}, "Usage: ehsink deadletters list"},
		{[]string{"deadletters", "purge"}, `unknown action "purge"`},
		{[]string{"deadletters", "show"}, "the letter's ID is required"},
		{[]string{"deadletters", "show", "x"}, `letter ID "x"`},
		{[]string{"deadletters", "list", "--dry-run"}, "--dry-run and --id go with replay"},
		{[]string{"deadletters", "replay", "--replayed"}, "--replayed goes with list"},
		{[]string{"deadletters", "list", "--since", "yesterday"}, "--since"},
	} {
		code, _, stderr := cli(t, tc.args...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
}

// amountEvents writes the events file of the dead-letter tests whose
// first mapping's decimal is too narrow: it refuses o-2, o-4 and t-1, a
// test event the corrected config's filter drops; the event without an id
// is refused by both mappings.
func amountEvents(t *testing.T, dir string) string {
	return writeIn(t, dir, "events.jsonl", strings.Join([]string{
		`{"id":"o-1","amount":12.5}`,
		`{"id":"o-2","amount":1234.5}`,
		`{"id":"o-3","amount":3}`,
		`{"id":"o-4","amount":99999.99}`,
		`{"amount":5}`,
		`{"id":"t-1","amount":500,"test":true}`,
		`{"id":"o-7","amount":7}`,
	}, "\n")+"\n")
}
