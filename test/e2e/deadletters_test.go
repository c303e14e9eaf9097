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
			amount := 1
			if i%2 == 1 {
				amount = -1
			}
			body := fmt.Sprintf(`{"id":"%s-%d","amount":%d}`, p, i, amount)
			if err := batch.AddEventData(&azeventhubs.EventData{Body: []byte(body)}, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := producer.SendEventDataBatch(ctx, batch, nil); err != nil {
			t.Fatal(err)
		}
	}
	work := t.TempDir()
	cfg := filepath.Join(work, "connectors.yaml")
	if err := os.WriteFile(cfg, []byte(`
connectors:
  - name: orders
    source: {connection: "`+conn+`", batch: {max_events: 100, max_wait: 100ms}}
    checkpoint: {file: {dir: `+filepath.Join(work, "checkpoints")+`}}
    sink:
      type: postgres
      dsn: "`+dsn+`"
      table: public.dl_orders
      columns: [{name: id, from: $.id}, {name: amount, from: $.amount, type: numeric}, {name: part, from: "@partition"}, {name: seq, from: "@sequence_number"}]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	count := func(q string) int {
		var c int
		if err := db.QueryRow(ctx, q).Scan(&c); err != nil {
			return -1
		}
		return c
	}
	run := startReplica(t, "run", cfg)
	waitUntil(t, ctx, "half the events as rows, half as dead letters", func() bool {
		return count(`SELECT count(*) FROM public.dl_orders`) == n && count(`SELECT count(*) FROM ehsink_dead_letters`) == n
	}, run)
	_ = run.cmd.Process.Kill()
	<-run.done
	if _, err := db.Exec(ctx, `ALTER TABLE public.dl_orders DROP CONSTRAINT dl_orders_amount_check`); err != nil {
		t.Fatal(err)
	}

	// The first replay is killed once it has reported a fifth of the
	// letters: somewhere in its next letter's transaction, or between two.
	replay := exec.CommandContext(ctx, binary, "deadletters", "replay", "-c", cfg)
	stdout, err := replay.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := replay.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	reported := 0
	for reported < n/5 && sc.Scan() {
		if strings.Contains(sc.Text(), "): replayed") {
			reported++
		}
	}
	_ = replay.Process.Kill()
	_ = replay.Wait()
	if reported < n/5 {
		t.Fatalf("the replay to kill reported %d letters replayed before it ended, want %d", reported, n/5)
	}
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
