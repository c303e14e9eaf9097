package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
	"github.com/jackc/pgx/v5"
	"github.com/parquet-go/parquet-go"

	"github.com/ehsink/ehsink/checkpoint"
	"github.com/ehsink/ehsink/emulator"
	"github.com/ehsink/ehsink/emulator/emulatortest"
	"github.com/ehsink/ehsink/internal/record"
	"github.com/ehsink/ehsink/internal/testenv"
)

// TestExplodeKilledAndResumed runs an exploding, filtering connector to
// PostgreSQL and one to Parquet in an `ehsink run` process, kills it
// (SIGKILL) three times while it commits, and restarts it: in the end each
// element (partition, sequence number, index) is in each sink exactly once,
// each dead letter once, and the checkpoints reach the last event.
func TestExplodeKilledAndResumed(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	pg := testenv.NewPostgres(t)
	dsn := pg.NewDatabase(t)
	parts := []string{"0", "1"}
	srv := emulatortest.Start(t, emulator.Config{Hubs: []emulator.HubConfig{{Name: "logs", Partitions: len(parts), ConsumerGroups: []string{"parquet"}}}})
	conn := srv.ConnectionString("logs")
	props, err := azeventhubs.ParseConnectionString(conn)
	if err != nil {
		t.Fatal(err)
	}
	const n = 300
	producer, err := azeventhubs.NewProducerClientFromConnectionString(conn, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close(context.Background())
	for _, p := range parts {
		for from := 0; from < n; from += 100 {
			batch, err := producer.NewEventDataBatch(ctx, &azeventhubs.EventDataBatchOptions{PartitionID: &p})
			if err != nil {
				t.Fatal(err)
			}
			for i := from; i < from+100; i++ {
				if err := batch.AddEventData(testenv.LogEvent(i), nil); err != nil {
					t.Fatal(err)
				}
			}
			if err := producer.SendEventDataBatch(ctx, batch, nil); err != nil {
				t.Fatal(err)
			}
		}
	}

	work := t.TempDir()
	ckptDir, outDir := filepath.Join(work, "checkpoints"), filepath.Join(work, "out")
	source := `{connection: "` + conn + `", CG batch: {max_events: 15, max_wait: 100ms}, load_balancing: {strategy: greedy, update_interval: 1s, ownership_expiration: 3s}}`
	shape := `
    filter: ` + testenv.LogFilter
	cfg := filepath.Join(work, "connectors.yaml")
	if err := os.WriteFile(cfg, []byte(`
drain_timeout: 20s
connectors:
  - name: logs-pg
    source: `+strings.Replace(source, "CG ", "", 1)+`
    checkpoint: {file: {dir: `+ckptDir+`}}`+shape+`
    sink:
      type: postgres
      dsn: "`+dsn+`"
      table: public.records
      create_table: true
      explode: $.records
      columns: [{name: part, from: "@partition"}, {name: seq, from: "@sequence_number"}, {name: idx, from: "@index"}, {name: v, from: $.v, type: integer}]
  - name: logs-pq
    source: `+strings.Replace(source, "CG ", "consumer_group: parquet, ", 1)+`
    checkpoint: {file: {dir: `+ckptDir+`}}`+shape+`
    sink:
      type: parquet
      dir: `+outDir+`
      max_rows: 40
      max_age: 200ms
      explode: $.records
      columns: [{name: part, from: "@partition"}, {name: seq, from: "@sequence_number"}, {name: idx, from: "@index"}, {name: v, from: $.v, type: int32}]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	pgCount := func() int {
		var c int
		if err := db.QueryRow(ctx, `SELECT count(*) FROM public.records`).Scan(&c); err != nil {
			return 0 // the table is created by the first run
		}
		return c
	}

	wantRows, wantDead, _ := testenv.LogWant(parts, n)
	for k, at := range []int{len(wantRows) / 5, len(wantRows) / 2, 4 * len(wantRows) / 5} {
		r := startReplica(t, fmt.Sprintf("run %d", k+1), cfg)
		waitUntil(t, ctx, fmt.Sprintf("%d rows in each sink before kill %d", at, k+1), func() bool {
			return pgCount() >= at && len(readLogRows(t, outDir)) >= at
		}, r)
		if err := r.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-r.done
	}
	fs, err := checkpoint.NewFileStore(ckptDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	store := checkpoint.Lowercase(fs, nil)
	last := func(cg string) bool {
		cps, err := store.ListCheckpoints(ctx, props.FullyQualifiedNamespace, "logs", cg, nil)
		if err != nil || len(cps) != len(parts) {
			return false
		}
		for _, cp := range cps {
			if cp.SequenceNumber == nil || *cp.SequenceNumber != n-1 {
				return false
			}
		}
		return true
	}
	r := startReplica(t, "final run", cfg)
	waitUntil(t, ctx, "both connectors checkpoint the last event", func() bool { return last("$default") && last("parquet") }, r)
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-r.done

	rows, err := db.Query(ctx, `SELECT part || '/' || seq || '/' || idx FROM public.records WHERE v = idx`)
	if err != nil {
		t.Fatal(err)
	}
	pgRows, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(pgRows)
	if !slices.Equal(pgRows, wantRows) || pgCount() != len(wantRows) {
		t.Errorf("PostgreSQL holds %d rows (%d checked), want %d exactly once", pgCount(), len(pgRows), len(wantRows))
	}
	dead, err := db.Query(ctx, `SELECT partition_id || '/' || sequence_number FROM ehsink_dead_letters`)
	if err != nil {
		t.Fatal(err)
	}
	pgDead, err := pgx.CollectRows(dead, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(pgDead)
	if !slices.Equal(pgDead, wantDead) {
		t.Errorf("PostgreSQL dead letters %v, want %v", pgDead, wantDead)
	}
	if got := readLogRows(t, outDir); !slices.Equal(got, wantRows) {
		t.Errorf("Parquet holds %d rows, want %d exactly once", len(got), len(wantRows))
	}
	if got := readLogDead(t, outDir); !slices.Equal(got, wantDead) {
		t.Errorf("Parquet dead letters %v, want %v", got, wantDead)
	}
}

type logRow struct {
	Part string `parquet:"part"`
	Seq  int64  `parquet:"seq"`
	Idx  int64  `parquet:"idx"`
	V    int32  `parquet:"v"`
}

// readLogRows reads every committed Parquet file under dir as
// "partition/seq/index", sorted, checking v == index.
func readLogRows(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	walkFiles(t, dir, ".parquet", func(path string, _ []byte) {
		rs, err := parquet.ReadFile[logRow](path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, r := range rs {
			if int64(r.V) != r.Idx {
				t.Fatalf("%s: row %+v holds another element's value", path, r)
			}
			out = append(out, fmt.Sprintf("%s/%d/%d", r.Part, r.Seq, r.Idx))
		}
	})
	slices.Sort(out)
	return out
}

// readLogDead reads the dead-letter files under dir as "partition/seq".
func readLogDead(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	walkFiles(t, dir, ".jsonl", func(path string, data []byte) {
		for sc := bufio.NewScanner(bytes.NewReader(data)); sc.Scan(); {
			var l record.DeadLetter
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			out = append(out, fmt.Sprintf("%s/%d", l.Partition, l.SequenceNumber))
		}
	})
	slices.Sort(out)
	return out
}

// walkFiles calls fn for each visible file under dir whose name ends in ext.
func walkFiles(t *testing.T, dir, ext string, fn func(path string, data []byte)) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ext) || strings.HasPrefix(d.Name(), ".") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fn(path, data)
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
}
