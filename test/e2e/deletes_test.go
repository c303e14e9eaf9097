package e2e_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
	"github.com/jackc/pgx/v5"

	"github.com/ehsink/ehsink/emulator"
	"github.com/ehsink/ehsink/emulator/emulatortest"
	"github.com/ehsink/ehsink/internal/testenv"
)

// changeStream is the Debezium change events of one partition, n of
// them over 40 keys of its own (id = partition*1000 + k): creates and
// updates, deletes, and tombstones (empty bodies). It returns the bodies
// and the table a clean run leaves for them (id → the sequence number of
// the key's last update, for the keys not deleted since).
func changeStream(partition, n int) ([]string, map[int]int) {
	bodies := make([]string, n)
	want := map[int]int{}
	x := uint32(2166136261 + partition)
	for i := range bodies {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		id := partition*1000 + int(x>>8)%40
		switch r := x % 20; {
		case r < 3:
			bodies[i] = "" // a tombstone
		case r < 8:
			bodies[i] = fmt.Sprintf(`{"before": {"id": %d, "v": null}, "after": null, "op": "d", "source": {"table": "customers"}}`, id)
			delete(want, id)
		default:
			op := "u"
			if _, live := want[id]; !live {
				op = "c"
			}
			bodies[i] = fmt.Sprintf(`{"before": null, "after": {"id": %d, "v": %d}, "op": %q, "source": {"table": "customers"}}`, id, i, op)
			want[id] = i
		}
	}
	return bodies, want
}

// TestDeletesKilledAndResumed runs a Debezium connector (upserts, deletes,
// tombstones) in an `ehsink run` process, kills it (SIGKILL) three times
// while it commits, and restarts it: in the end the table is exactly the
// table of a clean run (no deleted row back, no row at an older version)
// and the checkpoints reach the last event.
func TestDeletesKilledAndResumed(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	pg := testenv.NewPostgres(t)
	dsn := pg.NewDatabase(t)
	parts := []string{"0", "1"}
	srv := emulatortest.Start(t, emulator.Config{Hubs: []emulator.HubConfig{{Name: "customers", Partitions: len(parts)}}})
	conn := srv.ConnectionString("customers")
	const n = 400
	producer, err := azeventhubs.NewProducerClientFromConnectionString(conn, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close(context.Background())
	want := map[int]int{}
	for pi, p := range parts {
		bodies, w := changeStream(pi, n)
		maps.Copy(want, w)
		for from := 0; from < n; from += 100 {
			batch, err := producer.NewEventDataBatch(ctx, &azeventhubs.EventDataBatchOptions{PartitionID: &p})
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range bodies[from : from+100] {
				if err := batch.AddEventData(&azeventhubs.EventData{Body: []byte(b)}, nil); err != nil {
					t.Fatal(err)
				}
			}
			if err := producer.SendEventDataBatch(ctx, batch, nil); err != nil {
				t.Fatal(err)
			}
		}
	}

	work := t.TempDir()
	cfg := filepath.Join(work, "connectors.yaml")
	if err := os.WriteFile(cfg, []byte(`
drain_timeout: 20s
connectors:
  - name: customers
    source: {connection: "`+conn+`", batch: {max_events: 15, max_wait: 100ms}, load_balancing: {strategy: greedy, update_interval: 1s, ownership_expiration: 3s}}
    checkpoint: {file: {dir: `+filepath.Join(work, "checkpoints")+`}}
    sink:
      type: postgres
      dsn: "`+dsn+`"
      table: public.customers
      mode: upsert
      format: debezium
      key: [id]
      create_table: true
      columns: [{name: id, from: $.id, type: integer}, {name: v, from: $.v, type: integer}]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	// committed is how many events the table covers: the watermarks'
	// sequence numbers, plus one per partition.
	committed := func() int {
		var c int
		if err := db.QueryRow(ctx, `SELECT coalesce(sum(sequence_number + 1), 0) FROM ehsink_watermarks`).Scan(&c); err != nil {
			return 0 // created by the first run
		}
		return c
	}
	total := n * len(parts)
	for k, at := range []int{total / 5, total / 2, 4 * total / 5} {
		r := startReplica(t, fmt.Sprintf("run %d", k+1), cfg)
		waitUntil(t, ctx, fmt.Sprintf("%d events committed before kill %d", at, k+1), func() bool { return committed() >= at }, r)
		if err := r.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-r.done
	}
	r := startReplica(t, "final run", cfg)
	waitUntil(t, ctx, "every event committed", func() bool { return committed() == total }, r)
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-r.done

	rows, err := db.Query(ctx, `SELECT id, v FROM public.customers`)
	if err != nil {
		t.Fatal(err)
	}
	got := map[int]int{}
	for rows.Next() {
		var id, v int
		if err := rows.Scan(&id, &v); err != nil {
			t.Fatal(err)
		}
		got[id] = v
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, want) {
		var diff []string
		for id, v := range want {
			if g, ok := got[id]; !ok || g != v {
				diff = append(diff, fmt.Sprintf("id %d: want v=%d, got %d (present %t)", id, v, g, ok))
			}
		}
		for id, v := range got {
			if _, ok := want[id]; !ok {
				diff = append(diff, fmt.Sprintf("id %d: want no row (deleted), got v=%d", id, v))
			}
		}
		t.Fatalf("the table differs from a clean run's in %d keys:\n%s", len(diff), strings.Join(diff, "\n"))
	}
	var dead int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM ehsink_dead_letters`).Scan(&dead); err != nil || dead != 0 {
		t.Fatalf("%d dead letters (%v), want none: tombstones are skipped", dead, err)
	}
}
