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
// transaction, one connection per partition (see mergeBatch).
func rawMerge(b *testing.B, dsn string, postmaster, perPartition, chunk int) rawResult {
	b.Helper()
	createMergeTables(b, dsn)
	enq := time.Now()
	return perPartitionConns(b, dsn, postmaster, nil, func(ctx context.Context, conn *pgx.Conn, p int) error {
		id := strconv.Itoa(p)
		wm := int64(-1)
		var rows mergeRows
		for i := 0; i < perPartition; i += chunk {
			rows.reset()
			for j := i; j < min(i+chunk, perPartition); j++ {
				o := order(p, j)
				rows.add(o.OrderID, o.Customer.ID, o.Amount, o.Currency, o.CreatedAt, id, int64(j), enq)
			}
			if err := mergeBatch(ctx, conn, id, &wm, &rows); err != nil {
				return err
			}
		}
		return nil
	})
}

// createMergeTables makes the tables of the hand merge, raw_upsert and
// raw_watermarks (a row at -1 for every partition).
func createMergeTables(b *testing.B, dsn string) {
	b.Helper()
	query(b, dsn, `CREATE TABLE raw_upsert (`+rowDDL+`, _ehsink_partition text NOT NULL, _ehsink_seq bigint NOT NULL, PRIMARY KEY (order_id))`)
	query(b, dsn, `CREATE TABLE raw_watermarks (partition_id text PRIMARY KEY, sequence_number bigint NOT NULL)`)
	query(b, dsn, `INSERT INTO raw_watermarks SELECT p::text, -1 FROM generate_series(0, `+strconv.Itoa(partitions-1)+`) AS p`)
}

// mergeRows are the rows of one merge transaction, an array per column.
type mergeRows struct {
	orderID, customer, currency, part []string
	amount                            []float64
	created, enqueued                 []time.Time
	seq                               []int64
}

func (m *mergeRows) reset() {
	m.orderID, m.customer, m.currency, m.part = m.orderID[:0], m.customer[:0], m.currency[:0], m.part[:0]
	m.amount, m.created, m.enqueued, m.seq = m.amount[:0], m.created[:0], m.enqueued[:0], m.seq[:0]
}

func (m *mergeRows) add(orderID, customer string, amount float64, currency string, created time.Time, part string, seq int64, enqueued time.Time) {
	m.orderID, m.customer, m.amount, m.currency = append(m.orderID, orderID), append(m.customer, customer), append(m.amount, amount), append(m.currency, currency)
	m.created, m.part, m.seq, m.enqueued = append(m.created, created), append(m.part, part), append(m.seq, seq), append(m.enqueued, enqueued)
}

// mergeSQL is the upsert sink's statement, written by hand: INSERT …
// SELECT FROM unnest of one array per column, ON CONFLICT with the
// ordering guard.
var mergeSQL = func() string {
	cols := append(append([]string(nil), rowColumns...), "_ehsink_seq")
	var set []string
	for _, c := range cols[1:] {
		set = append(set, c+" = EXCLUDED."+c)
	}
	set = append(set, "_ehsink_partition = EXCLUDED._ehsink_partition")
	list := strings.Join(cols, ", ")
	return `INSERT INTO raw_upsert AS t (` + list + `, _ehsink_partition) SELECT ` + list + `, $10::text FROM unnest($1::text[], $2::text[],
		$3::float8[], $4::text[], $5::timestamptz[], $6::text[], $7::int8[], $8::timestamptz[], $9::int8[]) AS u (` + list + `)
		ON CONFLICT (order_id) DO UPDATE SET ` + strings.Join(set, ", ") +
		` WHERE t._ehsink_partition IS DISTINCT FROM EXCLUDED._ehsink_partition OR t._ehsink_seq < EXCLUDED._ehsink_seq`
}()

// mergeBatch merges rows of partition id in one transaction, as the
// upsert sink does: BEGIN and the watermark fence (from *wm to the last
// row's sequence number) in one round trip, then the merge and COMMIT in
// one round trip, the arrays encoded by pgx from typed slices.
func mergeBatch(ctx context.Context, conn *pgx.Conn, id string, wm *int64, rows *mergeRows) error {
	last := rows.seq[len(rows.seq)-1]
	begin := &pgx.Batch{}
	begin.Queue("BEGIN")
	begin.Queue(`UPDATE raw_watermarks SET sequence_number = $2 WHERE partition_id = $1 AND sequence_number = $3`, id, last, *wm)
	if err := conn.SendBatch(ctx, begin).Close(); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	end := &pgx.Batch{}
	end.Queue(mergeSQL, rows.orderID, rows.customer, rows.amount, rows.currency, rows.created, rows.part, rows.seq, rows.enqueued, rows.seq, id)
	end.Queue("COMMIT")
	if err := conn.SendBatch(ctx, end).Close(); err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	*wm = last
	return nil
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
