package postgres

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ehsink/ehsink/internal/secret"
	"github.com/ehsink/ehsink/internal/table/mapping"
)

// TestUpsertArrays merges rows of every mapping type, a row of NULLs and a
// row only pgx's general encoding takes (a typed nil) through the upsert's
// binary arrays, in a cached and an uncached query mode, and checks what
// the table holds.
func TestUpsertArrays(t *testing.T) {
	var cols mapping.Columns
	err := cols.UnmarshalConfig([]any{
		map[string]any{"name": "id", "from": "$.id", "type": "bigint"},
		map[string]any{"name": "s", "from": "$.s"},
		map[string]any{"name": "d", "from": "$.d", "type": "numeric(12,2)"},
		map[string]any{"name": "n", "from": "$.n", "type": "integer"},
		map[string]any{"name": "f", "from": "$.f", "type": "double"},
		map[string]any{"name": "ts", "from": "$.ts", "type": "timestamptz"},
		map[string]any{"name": "b", "from": "$.b", "type": "boolean"},
		map[string]any{"name": "j", "from": "$.j", "type": "json"},
		map[string]any{"name": "raw", "from": "$.raw", "type": "bytes"},
		map[string]any{"name": "u", "from": "$.u", "type": "uuid"},
	})
	if err != nil {
		t.Fatal(err)
	}
	dec := mapping.Decimal{Coef: -1250, Scale: 2}
	ts := time.Date(2026, 1, 2, 3, 4, 5, 600_000_000, time.UTC)
	row := func(id int64, raw []byte) bufRow {
		return bufRow{vals: []any{id, "é\"x", dec, int32(7), 1.5, ts, true, json.RawMessage(`{"a":[1,null]}`), raw,
			[16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, id * 10}}
	}
	nulls := bufRow{vals: make([]any, len(cols)+1)}
	nulls.vals[0], nulls.vals[len(cols)] = int64(4), int64(40)
	for _, mode := range []string{"cache_statement", "exec"} {
		t.Run(mode, func(t *testing.T) {
			dsn := newDB(t)
			sep := " "
			if strings.Contains(dsn, "://") {
				sep = "?"
				if strings.Contains(dsn, "?") {
					sep = "&"
				}
			}
			s := newTestSink(t, &sinkConfig{DSN: secret.String(dsn + sep + "default_query_exec_mode=" + mode), Table: "enc",
				Mode: modeUpsert, Key: []string{"id"}, Columns: cols, CreateTable: true, PoolSize: 1})
			ctx := testCtx(t)
			wr, _, err := s.Open(ctx, "0")
			if err != nil {
				t.Fatal(err)
			}
			w := wr.(*writer)
			b := w.buf(s.routes[0].static)
			conn, release, err := s.acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer release(false)
			if _, err := b.enc.encodeArrays(conn.TypeMap(), arrayOIDs(t, conn, b.d.sqlUpsert, len(cols)+2), []bufRow{row(2, []byte(nil))}); !errors.Is(err, errSlowPath) {
				t.Fatalf("encode of a typed nil: %v, want errSlowPath", err)
			}
			for _, rows := range [][]bufRow{{row(1, []byte{0, 1}), nulls}, {row(2, []byte(nil))}, {row(3, []byte{0, 1})}} {
				if _, err := w.upsert(ctx, conn, []merge{{b: b, rows: rows}}, false); err != nil {
					t.Fatal(err)
				}
			}
			var distinct, n int64
			q := `SELECT count(DISTINCT (s, d, n, f, ts, b, j, u)), count(*) FILTER (WHERE raw = '\x0001') FROM enc WHERE id <> 4`
			if err := conn.QueryRow(ctx, q).Scan(&distinct, &n); err != nil {
				t.Fatal(err)
			}
			if distinct != 1 || n != 2 {
				t.Fatalf("rows 1..3 differ (%d distinct, want 1) or lost bytea (%d, want 2)", distinct, n)
			}
			var got string
			q = `SELECT concat_ws('|', s, d, n, f, ts AT TIME ZONE 'UTC', b, j, u, raw IS NULL, _ehsink_partition, _ehsink_seq) FROM enc WHERE id = 2`
			if err := conn.QueryRow(ctx, q).Scan(&got); err != nil {
				t.Fatal(err)
			}
			want := `é"x|-12.50|7|1.5|2026-01-02 03:04:05.6|t|{"a": [1, null]}|01020304-0506-0708-090a-0b0c0d0e0f10|t|0|20`
			if got != want {
				t.Fatalf("row 2 = %s, want %s", got, want)
			}
			var allNull bool
			if err := conn.QueryRow(ctx, `SELECT num_nulls(s, d, n, f, ts, b, j, raw, u) = 9 FROM enc WHERE id = 4`).Scan(&allNull); err != nil || !allNull {
				t.Fatalf("the row of NULLs: %v, %v", allNull, err)
			}
		})
	}
}

// arrayOIDs returns the types of the first n-1 parameters of sql.
func arrayOIDs(t *testing.T, conn *pgx.Conn, sql string, n int) []uint32 {
	t.Helper()
	sd, err := conn.Prepare(testCtx(t), "", sql)
	if err != nil {
		t.Fatal(err)
	}
	if len(sd.ParamOIDs) != n {
		t.Fatalf("%d parameters, want %d", len(sd.ParamOIDs), n)
	}
	return sd.ParamOIDs[:n-1]
}
