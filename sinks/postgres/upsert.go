package postgres

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// upsertStmt prefixes the name of a table's prepared merge on a
// connection; like copyColumnsStmt, it is prepared once per connection,
// and on every merge when the DSN asks for an uncached query mode.
const upsertStmt = "ehsink_upsert_"

// deleteStmt prefixes the name of a table's prepared delete (deleteSQL),
// which takes the parameters of its merge.
const deleteStmt = "ehsink_delete_"

// merge is the rows of one table a flush (or a probe) merges, or, with
// del, the keys it deletes.
type merge struct {
	b    *tableBuf
	rows []bufRow
	del  bool
}

// upsert merges each table's rows with the table's upsert statement
// (upsertSQL), their columns sent as binary arrays, and, when commit is
// set, commits the transaction: all in one round trip. It returns the
// command tag of the last statement.
func (w *writer) upsert(ctx context.Context, conn *pgx.Conn, merges []merge, commit bool) (pgconn.CommandTag, error) {
	var tag pgconn.CommandTag
	cached := false
	switch conn.Config().DefaultQueryExecMode {
	case pgx.QueryExecModeCacheStatement, pgx.QueryExecModeCacheDescribe:
		cached = true
	}
	batch := &pgconn.Batch{}
	names := make([]string, 0, len(merges)+1)
	for _, m := range merges {
		d := m.b.d
		sql, prefix, what := d.sqlUpsert, upsertStmt, "upsert into "+d.name
		if m.del {
			sql, prefix, what = d.sqlDelete, deleteStmt, "delete from "+d.name
		}
		name := ""
		if cached {
			name = prefix + strconv.Itoa(d.id)
		}
		sd, err := conn.Prepare(ctx, name, sql)
		if err != nil {
			return tag, fmt.Errorf("%s: %w", what, err)
		}
		params, formats, err := w.encodeMerge(conn.TypeMap(), m, sd.ParamOIDs)
		if err != nil {
			return tag, fmt.Errorf("%s: %w", what, err)
		}
		if cached {
			batch.ExecStatement(sd, params, formats, nil)
		} else {
			batch.ExecParams(sql, params, sd.ParamOIDs, formats, nil)
		}
		names = append(names, what)
	}
	if commit {
		batch.ExecParams("COMMIT", nil, nil, nil, nil)
		names = append(names, "commit")
	}
	if len(names) == 0 {
		return tag, nil
	}
	results, err := conn.PgConn().ExecBatch(ctx, batch).ReadAll()
	for _, m := range merges {
		m.b.enc.release()
	}
	failed := len(results)
	for i, r := range results {
		if r.Err != nil {
			failed, err = i, r.Err
			break
		}
	}
	if err != nil {
		return tag, fmt.Errorf("%s: %w", names[min(failed, len(names)-1)], err)
	}
	return results[len(results)-1].CommandTag, nil
}

// encodeMerge returns the parameters of m's merge and their formats: the
// arrays from the table's encoder (binary), or, for values it has no
// binary plan for, from pgx's general encoding, then the partition.
func (w *writer) encodeMerge(tm *pgtype.Map, m merge, paramOIDs []uint32) ([][]byte, []int16, error) {
	ncols := len(m.b.d.r.copyCols)
	if len(paramOIDs) != ncols+1 {
		return nil, nil, fmt.Errorf("%d parameters described, want %d", len(paramOIDs), ncols+1)
	}
	e := &m.b.enc
	params, err := e.encodeArrays(tm, paramOIDs[:ncols], m.rows)
	formats := e.formats[:0]
	switch {
	case errors.Is(err, errSlowPath):
		params, formats, err = encodeGeneral(tm, m.b.d.r.copyCols, paramOIDs[:ncols], m.rows)
	case err == nil:
		for range params {
			formats = append(formats, pgtype.BinaryFormatCode)
		}
		e.formats = formats
	}
	if err != nil {
		return nil, nil, err
	}
	// text's binary form is its bytes
	return append(params, []byte(w.partition)), append(formats, pgtype.BinaryFormatCode), nil
}

// encodeGeneral encodes the columns of rows as arrays through pgx's
// general encoding: one []any per column, in the format pgx prefers for
// its type.
func encodeGeneral(m *pgtype.Map, cols []string, arrayOIDs []uint32, rows []bufRow) ([][]byte, []int16, error) {
	params := make([][]byte, len(arrayOIDs), len(arrayOIDs)+1)
	formats := make([]int16, len(arrayOIDs), len(arrayOIDs)+1)
	col := make([]any, len(rows))
	for j, oid := range arrayOIDs {
		for i := range rows {
			col[i] = rows[i].vals[j]
		}
		formats[j] = m.FormatCodeForOID(oid)
		b, err := m.Encode(oid, formats[j], col, nil)
		if err != nil {
			return nil, nil, fmt.Errorf("column %s: %w", cols[j], err)
		}
		params[j] = b
	}
	return params, formats, nil
}

// encodeArrays encodes rows as one binary one-dimensional array per column
// (PostgreSQL's array_recv form), column j typed arrayOIDs[j], all in
// e.buf; the result is valid until the next use of e. A type without an
// array codec in m, or a value without a binary plan, is errSlowPath.
func (e *copyEncoder) encodeArrays(m *pgtype.Map, arrayOIDs []uint32, rows []bufRow) ([][]byte, error) {
	if e.m != m || len(e.plans) != len(arrayOIDs) {
		e.m = m
		e.plans = make([]colPlan, len(arrayOIDs))
	}
	b := e.buf[:0]
	ends := e.ends[:0]
	for j, oid := range arrayOIDs {
		t, ok := m.TypeForOID(oid)
		if !ok {
			return nil, errSlowPath
		}
		ac, ok := t.Codec.(*pgtype.ArrayCodec)
		if !ok || ac.ElementType == nil {
			return nil, errSlowPath
		}
		elem := ac.ElementType.OID
		b = binary.BigEndian.AppendUint32(b, 1) // dimensions
		flags := len(b)
		b = binary.BigEndian.AppendUint32(b, 0) // 1: has NULLs
		b = binary.BigEndian.AppendUint32(b, elem)
		b = binary.BigEndian.AppendUint32(b, uint32(len(rows)))
		b = binary.BigEndian.AppendUint32(b, 1) // lower bound
		for i := range rows {
			if len(rows[i].vals) != len(arrayOIDs) {
				return nil, errSlowPath // let pgx report it
			}
			at := len(b)
			var err error
			if b, err = e.appendValue(b, elem, j, rows[i].vals[j]); err != nil {
				return nil, err
			}
			if binary.BigEndian.Uint32(b[at:]) == 0xFFFFFFFF {
				binary.BigEndian.PutUint32(b[flags:], 1)
			}
		}
		ends = append(ends, len(b))
	}
	e.buf, e.ends = b, ends
	params := e.params[:0]
	start := 0
	for _, end := range ends {
		params = append(params, b[start:end:end])
		start = end
	}
	e.params = params
	return params, nil
}

// release forgets the parameters of the last merge, and lets an unusually
// large buffer go.
func (e *copyEncoder) release() {
	clear(e.params)
	e.params = e.params[:0]
	if cap(e.buf) > maxKeptCopyBuf {
		e.buf = nil
	}
}
