package postgres

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/ehsink/ehsink/internal/table/mapping"
)

// TestCopyEncoder copies the same rows through the encoder's own binary
// path and through pgx's (which it falls back to for values it has no
// plan for, such as a typed nil), in every query mode, and checks both
// store the same values.
func TestCopyEncoder(t *testing.T) {
	dsn := newDB(t)
	execSQL(t, dsn, `CREATE TABLE enc (id bigint, s text, d numeric(12,2), n integer, f double precision, ts timestamptz, tl timestamp, b boolean, j jsonb, raw bytea, u uuid)`)
	cols := []string{"id", "s", "d", "n", "f", "ts", "tl", "b", "j", "raw", "u"}
	dec := mapping.Decimal{Coef: -1250, Scale: 2}
	ts := time.Date(2026, 1, 2, 3, 4, 5, 600_000_000, time.UTC)
	// a timestamp column takes the wall clock of a zoned time
	local := time.Date(2026, 1, 2, 3, 4, 5, 600_000_000, time.FixedZone("UTC+5:30", 5*3600+1800))
	row := func(id int64, raw []byte) bufRow {
		return bufRow{vals: []any{id, "é\"x", dec, int32(7), 1.5, ts, local, true, json.RawMessage(`{"a":[1,null]}`), raw,
			[16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}}}
	}
	nulls := bufRow{vals: make([]any, len(cols))}
	table := pgx.Identifier{"enc"}
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeExec} {
		t.Run(mode.String(), func(t *testing.T) {
			ctx := testCtx(t)
			execSQL(t, dsn, `TRUNCATE enc`)
			cc, err := pgx.ParseConfig(dsn)
			if err != nil {
				t.Fatal(err)
			}
			cc.DefaultQueryExecMode = mode
			conn, err := pgx.ConnectConfig(ctx, cc)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			registerTypes(conn)
			var e copyEncoder
			cp := copySQL(table, cols)
			desc := describeSQL(table, cols)
			fast := []bufRow{row(1, []byte{0, 1}), nulls}
			if err := e.encode(conn.TypeMap(), mustDescribe(t, conn, desc), fast); err != nil {
				t.Fatalf("encode: %v, want the encoder's own path", err)
			}
			slow := []bufRow{row(2, []byte(nil))} // a typed nil: pgx's rules
			if err := e.encode(conn.TypeMap(), mustDescribe(t, conn, desc), slow); !errors.Is(err, errSlowPath) {
				t.Fatalf("encode of a typed nil: %v, want errSlowPath", err)
			}
			for _, rows := range [][]bufRow{fast, slow, {row(3, []byte{0, 1})}} {
				if err := e.copyRows(ctx, conn, table, cols, desc, cp, rows); err != nil {
					t.Fatal(err)
				}
			}
			var distinct, n int64
			q := `SELECT count(DISTINCT (s, d, n, f, ts, tl, b, j, u)), count(*) FILTER (WHERE raw = '\x0001') FROM enc WHERE id IS NOT NULL`
			if err := conn.QueryRow(ctx, q).Scan(&distinct, &n); err != nil {
				t.Fatal(err)
			}
			if distinct != 1 || n != 2 {
				t.Fatalf("rows 1..3 differ (%d distinct, want 1) or lost bytea (%d, want 2)", distinct, n)
			}
			var got string
			q = `SELECT concat_ws('|', s, d, n, f, ts AT TIME ZONE 'UTC', tl, b, j, u, raw IS NULL) FROM enc WHERE id = 2`
			if err := conn.QueryRow(ctx, q).Scan(&got); err != nil {
				t.Fatal(err)
			}
			want := `é"x|-12.50|7|1.5|2026-01-02 03:04:05.6|2026-01-02 03:04:05.6|t|{"a": [1, null]}|01020304-0506-0708-090a-0b0c0d0e0f10|t`
			if got != want {
				t.Fatalf("row 2 = %s, want %s", got, want)
			}
			var allNull bool
			if err := conn.QueryRow(ctx, `SELECT num_nulls(id, s, d, n, f, ts, tl, b, j, raw, u) = 11 FROM enc WHERE id IS NULL`).Scan(&allNull); err != nil || !allNull {
				t.Fatalf("the row of NULLs: %v, %v", allNull, err)
			}
		})
	}
}

func mustDescribe(t *testing.T, conn *pgx.Conn, sql string) []pgconn.FieldDescription {
	t.Helper()
	sd, err := conn.Prepare(testCtx(t), "", sql)
	if err != nil {
		t.Fatal(err)
	}
	return sd.Fields
}

// TestTimeEncodingIsPgx: the encoder's own timestamp encoding gives the
// bytes pgx's plan gives, for both timestamp types, zones, instants before
// 1970 and 2000, and nanoseconds below a microsecond.
func TestTimeEncodingIsPgx(t *testing.T) {
	m := pgtype.NewMap()
	zone := time.FixedZone("UTC+5:30", 5*3600+1800)
	times := []time.Time{
		time.Date(2026, 1, 2, 3, 4, 5, 600_000_999, time.UTC),
		time.Date(2026, 1, 2, 3, 4, 5, 600_000_999, zone),
		time.Date(1999, 12, 31, 23, 59, 59, 999_999_999, time.UTC),
		time.Date(1969, 7, 20, 20, 17, 40, 123_456_789, zone),
		time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC),
	}
	for _, oid := range []uint32{pgtype.TimestamptzOID, pgtype.TimestampOID} {
		e := copyEncoder{m: m, plans: make([]colPlan, 1)}
		for _, ts := range times {
			got, err := e.appendValue(nil, oid, 0, ts)
			if err != nil {
				t.Fatal(err)
			}
			want, err := m.PlanEncode(oid, pgtype.BinaryFormatCode, ts).Encode(ts, nil)
			if err != nil {
				t.Fatal(err)
			}
			want = append([]byte{0, 0, 0, byte(len(want))}, want...)
			if !bytes.Equal(got, want) {
				t.Errorf("oid %d, %v: % x, pgx % x", oid, ts, got, want)
			}
		}
	}
}
