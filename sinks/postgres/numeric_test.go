package postgres

import (
	"context"
	"math"
	"math/big"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/ehsink/ehsink/internal/table/mapping"
)

// TestDecimalEncoding sends decimals through the sink's codec to a real
// server and reads them back as text.
func TestDecimalEncoding(t *testing.T) {
	ctx := testCtx(t)
	conn, err := pgx.Connect(ctx, testenvDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	registerTypes(conn)
	big1, _ := new(big.Int).SetString("-123456789012345678901234567890", 10)
	for _, d := range []mapping.Decimal{
		{}, {Scale: 2}, {Coef: 1}, {Coef: -1}, {Coef: 5, Scale: 3}, {Coef: 12, Scale: 2}, {Coef: 123456, Scale: 2},
		{Coef: 10000}, {Coef: 100000000, Scale: 4}, {Coef: -99999999, Scale: 8}, {Coef: 1, Scale: 20},
		{Coef: math.MaxInt64}, {Coef: math.MinInt64, Scale: 5}, {Coef: 120000, Scale: 1}, {Big: big1, Scale: 7},
	} {
		var got string
		if err := conn.QueryRow(ctx, `SELECT $1::numeric::text`, d).Scan(&got); err != nil {
			t.Fatalf("%v: %v", d, err)
		}
		if want := d.String(); got != want {
			t.Errorf("%+v: server read %s, want %s", d, got, want)
		}
	}
}

func testenvDSN(t *testing.T) string { t.Helper(); return newDB(t) }
