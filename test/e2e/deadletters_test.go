package e2e_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/emulator"
	"github.com/ehsink/ehsink/emulator/emulatortest"
	"github.com/ehsink/ehsink/internal/parquettest"
	"github.com/ehsink/ehsink/internal/testenv"
)

// TestDeadLetterReplayKilled: a run whose table refuses half the events (a
// CHECK constraint) dead-letters them; the constraint is dropped (the fix)
// and `ehsink deadletters replay` is killed with SIGKILL in the middle of
// its letters, each replayed in a transaction that writes its row and
// marks it; a second replay finishes. Every event is then in the table
// once and every letter is marked.
func TestDeadLetterReplayKilled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	dsn := testenv.NewPostgres(t).NewDatabase(t)
	db := connect(t, ctx, dsn)
	if _, err := db.Exec(ctx, `CREATE TABLE public.dl_orders (id text, amount numeric CHECK (amount >= 0), part text, seq bigint)`); err != nil {
		t.Fatal(err)
	}
	srv := emulatortest.Start(t, emulator.Config{Hubs: []emulator.HubConfig{{Name: "orders", Partitions: 2}}})
	conn := srv.ConnectionString("orders")
	const n = 400 // per partition; the odd ones are refused
	sendAmounts(t, ctx, conn, n, "-1")
	work := t.TempDir()
	cfg := writeOrdersConfig(t, filepath.Join(work, "connectors.yaml"), conn, work, `
      type: postgres
      dsn: "`+dsn+`"
      table: public.dl_orders
      columns: [{name: id, from: $.id}, {name: amount, from: $.amount, type: numeric}, {name: part, from: "@partition"}, {name: seq, from: "@sequence_number"}]
`)
	count := func(q string) int {
		var c int
		if err := db.QueryRow(ctx, q).Scan(&c); err != nil {
			return -1
		}
		return c
	}
	runUntil(t, ctx, cfg, "half the events as rows, half as dead letters", func() bool {
		return count(`SELECT count(*) FROM public.dl_orders`) == n && count(`SELECT count(*) FROM ehsink_dead_letters`) == n
	})
	if _, err := db.Exec(ctx, `ALTER TABLE public.dl_orders DROP CONSTRAINT dl_orders_amount_check`); err != nil {
		t.Fatal(err)
	}

	// The first replay is killed once it has reported a fifth of the
	// letters: somewhere in its next letter's transaction, or between two.
	reported := killReplay(t, ctx, cfg, n/5)
	partial := count(`SELECT count(*) FROM public.dl_orders`)
	t.Logf("killed after %d letters reported: %d rows, %d letters marked", reported, partial,
		count(`SELECT count(*) FROM ehsink_dead_letters WHERE replayed_at IS NOT NULL`))

	out, err := exec.CommandContext(ctx, binary, "deadletters", "replay", "-c", cfg).CombinedOutput()
	if err != nil {
		t.Fatalf("second replay: %v\n%s", err, out)
	}
	if rows, distinct := count(`SELECT count(*) FROM public.dl_orders`), count(`SELECT count(DISTINCT (part, seq)) FROM public.dl_orders`); rows != 2*n || distinct != 2*n {
		t.Fatalf("after a killed replay and a second one: %d rows, %d distinct events, want %d of each (%d before the second)", rows, distinct, 2*n, partial)
	}
	if left := count(`SELECT count(*) FROM ehsink_dead_letters WHERE replayed_at IS NULL`); left != 0 {
		t.Fatalf("%d letters not marked replayed after both replays", left)
	}
	if wrong := count(`SELECT count(*) FROM public.dl_orders WHERE id <> part || '-' || seq::text`); wrong != 0 {
		t.Fatalf("%d rows whose id is not their event's", wrong)
	}
}

// writeOrdersConfig writes to path a config of one connector "orders" on
// the hub of conn, checkpointing under work, with sink (the inside of its
// sink block, indented), and returns path.
func writeOrdersConfig(t *testing.T, path, conn, work, sink string) string {
	t.Helper()
	cfg := `
connectors:
  - name: orders
    source: {connection: "` + conn + `", batch: {max_events: 100, max_wait: 100ms}}
    checkpoint: {file: {dir: ` + filepath.Join(work, "checkpoints") + `}}
    sink:` + sink
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// sendAmounts sends n events to each of the hub's two partitions,
// {"id": "<partition>-<seq>", "amount": ...}: 1 for even sequence numbers,
// bad for odd ones.
func sendAmounts(t *testing.T, ctx context.Context, conn string, n int, bad string) {
	t.Helper()
	producer, err := azeventhubs.NewProducerClientFromConnectionString(conn, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close(context.Background())
	for _, p := range []string{"0", "1"} {
		batch, err := producer.NewEventDataBatch(ctx, &azeventhubs.EventDataBatchOptions{PartitionID: &p})
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			amount := "1"
			if i%2 == 1 {
				amount = bad
			}
			body := fmt.Sprintf(`{"id":"%s-%d","amount":%s}`, p, i, amount)
			if err := batch.AddEventData(&azeventhubs.EventData{Body: []byte(body)}, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := producer.SendEventDataBatch(ctx, batch, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// runUntil runs `ehsink run -c cfg` until done holds, then kills it.
func runUntil(t *testing.T, ctx context.Context, cfg, what string, done func() bool) {
	t.Helper()
	run := startReplica(t, "run", cfg)
	waitUntil(t, ctx, what, done, run)
	_ = run.cmd.Process.Kill()
	<-run.done
}

// killReplay starts `ehsink deadletters replay -c cfg` and kills it with
// SIGKILL once it has reported after letters replayed; it returns how many
// it reported.
func killReplay(t *testing.T, ctx context.Context, cfg string, after int) int {
	t.Helper()
	replay := exec.CommandContext(ctx, binary, "deadletters", "replay", "-c", cfg)
	var stderr strings.Builder
	replay.Stderr = &stderr
	stdout, err := replay.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := replay.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	reported, lines := 0, []string{}
	for reported < after && sc.Scan() {
		if strings.Contains(sc.Text(), "): replayed") {
			reported++
		}
		if len(lines) < 5 {
			lines = append(lines, sc.Text())
		}
	}
	_ = replay.Process.Kill()
	_ = replay.Wait()
	if reported < after {
		t.Fatalf("the replay to kill reported %d letters replayed before it ended, want %d; its first lines:\n%s\nstderr:\n%s", reported, after, strings.Join(lines, "\n"), stderr.String())
	}
	return reported
}

// TestDeadLetterReplayKilledParquet: the killed replay of
// TestDeadLetterReplayKilled for the Parquet sink, whose letters are
// replayed through writers of their replay partitions, each letter's
// commit (a file published) its mark. The first mapping's decimal(4,2)
// refuses the odd events' 1234.5; the corrected one is decimal(7,2).
func TestDeadLetterReplayKilledParquet(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	srv := emulatortest.Start(t, emulator.Config{Hubs: []emulator.HubConfig{{Name: "orders", Partitions: 2}}})
	conn := srv.ConnectionString("orders")
	const n = 100 // per partition; the odd ones are refused
	sendAmounts(t, ctx, conn, n, "1234.5")
	work := t.TempDir()
	out := filepath.Join(work, "out")
	config := func(amount string) string {
		return writeOrdersConfig(t, filepath.Join(work, amount+".yaml"), conn, work, `
      type: parquet
      dir: `+out+`
      max_age: 200ms
      columns:
        id: {from: $.id, nullable: false}
        amount: {from: $.amount, type: "decimal(`+amount+`,2)"}
        part: {from: "@partition"}
        seq: {from: "@sequence_number", type: int64}
`)
	}
	// rows reads every committed data file: each row's id and how many
	// times it is there; letters counts the dead-letter files' lines.
	rows := func() map[string]int {
		got := map[string]int{}
		walkFiles(t, out, ".parquet", func(path string, data []byte) {
			if strings.Contains(path, "/_") {
				return // dead letters, claims
			}
			tb, err := parquettest.Read(data)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			for _, r := range tb.Rows {
				got[fmt.Sprint(r["id"])]++
			}
		})
		return got
	}
	letters := func() int {
		c := 0
		walkFiles(t, out, "", func(path string, data []byte) {
			if strings.Contains(path, "/_dead_letters/") {
				c += strings.Count(string(data), "\n")
			}
		})
		return c
	}
	runUntil(t, ctx, config("4"), "half the events as rows, half as dead letters", func() bool {
		return len(rows()) == n && letters() == n
	})
	t.Logf("first run done: %d events in the files, %d letters", len(rows()), letters())
	fixed := config("7")
	reported := killReplay(t, ctx, fixed, n/5)
	partial := len(rows())
	t.Logf("killed after %d letters reported: %d events in the files", reported, partial)
	if b, err := exec.CommandContext(ctx, binary, "deadletters", "replay", "-c", fixed).CombinedOutput(); err != nil {
		t.Fatalf("second replay: %v\n%s", err, b)
	}
	got := rows()
	for p := range 2 {
		for i := range n {
			if id := fmt.Sprintf("%d-%d", p, i); got[id] != 1 {
				t.Fatalf("after a killed replay and a second one, event %s is in the files %d times, want once (%d events before the second)", id, got[id], partial)
			}
		}
	}
	if len(got) != 2*n {
		t.Fatalf("%d events in the files, want %d", len(got), 2*n)
	}
}
