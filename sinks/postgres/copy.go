package postgres

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// maxKeptCopyBuf is the largest encoding buffer a writer keeps between
// flushes; a larger one (an unusually big flush) is let go.
const maxKeptCopyBuf = 4 << 20

// errSlowPath means a value has no cached binary plan; the flush copies
// through pgx.Conn.CopyFrom instead, which knows every fallback.
var errSlowPath = errors.New("value needs pgx's general encoding")

// copyEncoder encodes rows into PostgreSQL's binary COPY format with one
// encode plan per column, looked up once per connection and Go type.
//
// pgx.Conn.CopyFrom looks a plan up for every value (two map lookups),
// streams through an io.Pipe and a goroutine, and grows a fresh buffer
// for every call; for a flush of 1,000 narrow rows that was a quarter of
// the COPY's time and most of the sink's garbage. The encoder builds the
// whole COPY payload in a buffer the writer keeps, and the connection
// sends it as is. A value it has no plan for (a type pgx can only encode
// through its text fallbacks) sends the flush down pgx's path instead, so
// what can be copied is exactly what pgx.Conn.CopyFrom can copy.
//
// A copyEncoder is used by one writer, one goroutine at a time.
type copyEncoder struct {
	m     *pgtype.Map // the type map plans belong to
	plans []colPlan
	buf   []byte
	// for the upsert's arrays (encodeArrays): where each ends in buf,
	// the parameters, their formats
	ends    []int
	params  [][]byte
	formats []int16
}

// colPlan is the binary encode plan of one column for one Go type.
type colPlan struct {
	typ     reflect.Type
	plan    pgtype.EncodePlan
	nilable bool // a nil of typ is NULL or a nil driver.Valuer to pgx
}

// copyRows copies rows into table through conn. sql is the COPY
// statement, describe the SELECT of the same columns whose description
// gives their types. The description is a statement prepared once per
// connection and table (named by pgx from a digest of its text), so it
// costs one round trip per connection and table. (When the DSN asks for
// an uncached query mode, the columns are described on every COPY, as
// pgx.Conn.CopyFrom does then.)
func (e *copyEncoder) copyRows(ctx context.Context, conn *pgx.Conn, table pgx.Identifier, cols []string, describe, sql string, rows []bufRow) error {
	name := "" // describe each time, as pgx does in these modes
	switch conn.Config().DefaultQueryExecMode {
	case pgx.QueryExecModeCacheStatement, pgx.QueryExecModeCacheDescribe:
		name = describe // named by a digest of its text: one per table
	}
	sd, err := conn.Prepare(ctx, name, describe)
	if err != nil {
		return err
	}
	if len(sd.Fields) != len(cols) {
		return fmt.Errorf("%s: %d columns described, want %d", table.Sanitize(), len(sd.Fields), len(cols))
	}
	if err := e.encode(conn.TypeMap(), sd.Fields, rows); err != nil {
		if !errors.Is(err, errSlowPath) {
			return err
		}
		_, err := conn.CopyFrom(ctx, table, cols, &rowSource{rows: rows, i: -1})
		return err
	}
	_, err = conn.PgConn().CopyFrom(ctx, bytes.NewReader(e.buf), sql)
	if err != nil || cap(e.buf) > maxKeptCopyBuf {
		// pgconn reads the payload in a goroutine of its own, which a
		// failed CopyFrom (a cancelled context, a dead connection) may
		// return before: the buffer it may still read is let go, never
		// written again (the race detector saw a reused reader).
		e.buf = nil
	}
	return err
}

// encode writes the COPY payload of rows into e.buf.
func (e *copyEncoder) encode(m *pgtype.Map, fields []pgconn.FieldDescription, rows []bufRow) error {
	if e.m != m || len(e.plans) != len(fields) {
		e.m = m
		e.plans = make([]colPlan, len(fields))
	}
	b := append(e.buf[:0], "PGCOPY\n\377\r\n\000"...)
	b = binary.BigEndian.AppendUint32(b, 0) // flags
	b = binary.BigEndian.AppendUint32(b, 0) // header extension length
	for _, r := range rows {
		if len(r.vals) != len(fields) {
			return errSlowPath // let pgx report it
		}
		b = binary.BigEndian.AppendUint16(b, uint16(len(fields)))
		for i, v := range r.vals {
			var err error
			if b, err = e.appendValue(b, fields[i].DataTypeOID, i, v); err != nil {
				return err
			}
		}
	}
	e.buf = binary.BigEndian.AppendUint16(b, 0xFFFF) // trailer
	return nil
}

// appendValue appends v, the value of column i whose type is oid, as a
// length-prefixed binary value (or a NULL), the form shared by COPY rows
// and array elements. It returns errSlowPath for a value without a
// cached binary plan.
func (e *copyEncoder) appendValue(b []byte, oid uint32, i int, v any) ([]byte, error) {
	if v == nil {
		return binary.BigEndian.AppendUint32(b, 0xFFFFFFFF), nil // NULL
	}
	if t, ok := v.(time.Time); ok {
		// pgx's plan for a time.Time boxes it into a wrapper on every
		// value (an allocation per timestamp); the encoding is pgx's.
		switch oid {
		case pgtype.TimestamptzOID:
			return appendMicros(b, t), nil
		case pgtype.TimestampOID:
			if t.Location() != time.UTC { // the wall clock, as pgx sends it
				t = time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
			}
			return appendMicros(b, t), nil
		}
	}
	p := &e.plans[i]
	if t := reflect.TypeOf(v); p.typ != t {
		plan := e.m.PlanEncode(oid, pgtype.BinaryFormatCode, v)
		if plan == nil {
			return b, errSlowPath
		}
		switch t.Kind() {
		case reflect.Chan, reflect.Func, reflect.Map, reflect.Pointer, reflect.UnsafePointer, reflect.Interface, reflect.Slice:
			p.nilable = true
		default:
			p.nilable = false
		}
		p.typ, p.plan = t, plan
	}
	if p.nilable && reflect.ValueOf(v).IsNil() {
		return b, errSlowPath // pgx's NULL and driver.Valuer rules
	}
	start := len(b)
	b = binary.BigEndian.AppendUint32(b, 0)
	out, err := p.plan.Encode(v, b)
	if err != nil {
		return b, errSlowPath
	}
	if out == nil { // the value encoded as NULL
		return binary.BigEndian.AppendUint32(b[:start], 0xFFFFFFFF), nil
	}
	binary.BigEndian.PutUint32(out[start:], uint32(len(out)-start-4))
	return out, nil
}

// microsFromUnixToY2K is PostgreSQL's epoch, 2000-01-01 UTC, in
// microseconds after the Unix epoch.
const microsFromUnixToY2K = 946684800 * 1_000_000

// appendMicros appends t as a length-prefixed binary timestamp:
// microseconds since 2000-01-01, truncated as pgx truncates them.
func appendMicros(b []byte, t time.Time) []byte {
	b = binary.BigEndian.AppendUint32(b, 8)
	return binary.BigEndian.AppendUint64(b, uint64(t.Unix()*1_000_000+int64(t.Nanosecond())/1000-microsFromUnixToY2K))
}
