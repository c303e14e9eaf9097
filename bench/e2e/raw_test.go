//go:build linux

package e2e

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// rowSource makes rows [i, end) of partition p for CopyFrom.
type rowSource struct {
	p, i, end int
	enqueued  time.Time
	cur       []any
}

func (r *rowSource) Next() bool {
	if r.i >= r.end {
		return false
	}
	r.cur = row(r.p, r.i, r.enqueued)
	r.i++
	return true
}
func (r *rowSource) Values() ([]any, error) { return r.cur, nil }
func (r *rowSource) Err() error             { return nil }

// rawResult is one raw baseline.
type rawResult struct {
	elapsed   time.Duration
	serverCPU time.Duration
}

// perPartitionConns runs fn for every partition at once, each on its own
// connection, and times the whole from the first statement to the last.
func perPartitionConns(b *testing.B, dsn string, postmaster int, setup func(ctx context.Context, conn *pgx.Conn, p int) error,
	fn func(ctx context.Context, conn *pgx.Conn, p int) error) rawResult {
	b.Helper()
	ctx := context.Background()
	conns := make([]*pgx.Conn, partitions)
	for p := range conns {
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close(ctx)
		if setup != nil {
			if err := setup(ctx, c, p); err != nil {
				b.Fatal(err)
			}
		}
		conns[p] = c
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	cpu0 := serverCPU(b, postmaster)
	start := time.Now()
	for p, c := range conns {
		wg.Go(func() {
			if err := fn(ctx, c, p); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("partition %d: %w", p, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	r := rawResult{elapsed: time.Since(start), serverCPU: serverCPU(b, postmaster) - cpu0}
	if err := errors.Join(errs...); err != nil {
		b.Fatal(err)
	}
	return r
}

// rawCopy copies every row with pgx.CopyFrom, chunk rows per COPY (each
// its own transaction), one connection per partition.
func rawCopy(b *testing.B, dsn string, postmaster, perPartition, chunk int) rawResult {
	b.Helper()
	query(b, dsn, `CREATE TABLE raw_append (`+rowDDL+`)`)
	enq := time.Now()
	return perPartitionConns(b, dsn, postmaster, nil, func(ctx context.Context, conn *pgx.Conn, p int) error {
		for i := 0; i < perPartition; i += chunk {
			src := &rowSource{p: p, i: i, end: min(i+chunk, perPartition), enqueued: enq}
			if _, err := conn.CopyFrom(ctx, pgx.Identifier{"raw_append"}, rowColumns, src); err != nil {
				return err
			}
		}
		return nil
	})
}

// rawMerge does the upsert sink's merge by hand, chunk rows per
// transaction, one connection per partition: BEGIN and the watermark
// fence in one round trip, then INSERT … SELECT FROM unnest of one array
// per column, ON CONFLICT with the ordering guard, and COMMIT in one round
// trip, the arrays encoded by pgx from typed slices.
func rawMerge(b *testing.B, dsn string, postmaster, perPartition, chunk int) rawResult {
	b.Helper()
	query(b, dsn, `CREATE TABLE raw_upsert (`+rowDDL+`, _ehsink_partition text NOT NULL, _ehsink_seq bigint NOT NULL, PRIMARY KEY (order_id))`)
	query(b, dsn, `CREATE TABLE raw_watermarks (partition_id text PRIMARY KEY, sequence_number bigint NOT NULL)`)
	cols := append(append([]string(nil), rowColumns...), "_ehsink_seq")
	var set []string
	for _, c := range cols[1:] {
		set = append(set, c+" = EXCLUDED."+c)
	}
	set = append(set, "_ehsink_partition = EXCLUDED._ehsink_partition")
	list := strings.Join(cols, ", ")
	merge := `INSERT INTO raw_upsert AS t (` + list + `, _ehsink_partition) SELECT ` + list + `, $10::text FROM unnest($1::text[], $2::text[],
		$3::float8[], $4::text[], $5::timestamptz[], $6::text[], $7::int8[], $8::timestamptz[], $9::int8[]) AS u (` + list + `)
		ON CONFLICT (order_id) DO UPDATE SET ` + strings.Join(set, ", ") +
		` WHERE t._ehsink_partition IS DISTINCT FROM EXCLUDED._ehsink_partition OR t._ehsink_seq < EXCLUDED._ehsink_seq`
	enq := time.Now()
	setup := func(ctx context.Context, conn *pgx.Conn, p int) error {
		_, err := conn.Exec(ctx, `INSERT INTO raw_watermarks VALUES ($1, -1)`, strconv.Itoa(p))
		return err
	}
	return perPartitionConns(b, dsn, postmaster, setup, func(ctx context.Context, conn *pgx.Conn, p int) error {
		id := strconv.Itoa(p)
		wm := int64(-1)
		var (
			orderID, customer, currency, part []string
			amount                            []float64
			created, enqueued                 []time.Time
			seq                               []int64
		)
		for i := 0; i < perPartition; i += chunk {
			end := min(i+chunk, perPartition)
			begin := &pgx.Batch{}
			begin.Queue("BEGIN")
			begin.Queue(`UPDATE raw_watermarks SET sequence_number = $2 WHERE partition_id = $1 AND sequence_number = $3`, id, int64(end-1), wm)
			if err := conn.SendBatch(ctx, begin).Close(); err != nil {
				return fmt.Errorf("begin: %w", err)
			}
			orderID, customer, currency, part = orderID[:0], customer[:0], currency[:0], part[:0]
			amount, created, enqueued, seq = amount[:0], created[:0], enqueued[:0], seq[:0]
			for j := i; j < end; j++ {
				o := order(p, j)
				orderID, customer, amount, currency = append(orderID, o.OrderID), append(customer, o.Customer.ID), append(amount, o.Amount), append(currency, o.Currency)
				created, part, seq, enqueued = append(created, o.CreatedAt), append(part, id), append(seq, int64(j)), append(enqueued, enq)
			}
			end2 := &pgx.Batch{}
			end2.Queue(merge, orderID, customer, amount, currency, created, part, seq, enqueued, seq, id)
			end2.Queue("COMMIT")
			if err := conn.SendBatch(ctx, end2).Close(); err != nil {
				return fmt.Errorf("merge: %w", err)
			}
			wm = int64(end - 1)
		}
		return nil
	})
}

// query runs one statement on a new connection and scans its one row
// into dest (none for a statement without rows).
func query(b *testing.B, dsn, sql string, dest ...any) {
	b.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	if len(dest) == 0 {
		_, err = conn.Exec(ctx, sql)
	} else {
		err = conn.QueryRow(ctx, sql).Scan(dest...)
	}
	if err != nil {
		b.Fatalf("%s: %v", sql, err)
	}
}

// postmasterPID finds the server process through a backend's parent, or
// returns 0 when the server is not a process of this machine.
func postmasterPID(b *testing.B, dsn string) int {
	b.Helper()
	var backend int
	query(b, dsn, `SELECT pg_backend_pid()`, &backend)
	if pm := parentPID(backend); pm > 1 {
		return pm
	}
	return 0
}

func countRows(b *testing.B, dsn, table string) int {
	b.Helper()
	var n int
	query(b, dsn, `SELECT count(*) FROM `+pgx.Identifier{table}.Sanitize(), &n)
	return n
}
