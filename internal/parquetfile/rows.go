package parquetfile

import (
	pq "github.com/parquet-go/parquet-go"

	"github.com/ehsink/ehsink/internal/table/mapping"
)

// RowMapper turns events into Parquet rows: the shared mapping gives typed
// Go values, the converters give Parquet values in schema order. It is safe
// for concurrent use.
type RowMapper struct {
	m     *mapping.Mapper
	convs []converter
}

func NewRowMapper(cols mapping.Columns, explode mapping.Path) (*RowMapper, error) {
	m, err := mapping.CompileWith(cols, mapping.Options{Explode: explode})
	if err != nil {
		return nil, err
	}
	return &RowMapper{m: m, convs: newConverters(cols)}, nil
}

// MapRow maps row j of an event into the Parquet values appended to row,
// through vals (reused when it has the capacity). A failure of an exploded
// element names the element.
func (r *RowMapper) MapRow(rows *mapping.Rows, j int, row pq.Row, vals []any) (pq.Row, []any, error) {
	if cap(vals) < len(r.convs) {
		vals = make([]any, len(r.convs))
	}
	vals = vals[:len(r.convs)]
	if err := rows.Map(j, vals); err != nil {
		return row, vals, err
	}
	row, err := r.AppendRow(row, vals)
	if err != nil && rows.Exploded() {
		err = &mapping.ElementError{Index: j, Err: err}
	}
	return row, vals, err
}

// Check reports whether the Parquet values of a mapped row convert, as
// AppendRow does (for `ehsink test`).
func (r *RowMapper) Check(vals []any) error {
	_, err := r.AppendRow(make(pq.Row, 0, len(r.convs)), vals)
	return err
}

// AppendRow appends the Parquet values of vals to row.
func (r *RowMapper) AppendRow(row pq.Row, vals []any) (pq.Row, error) {
	for i := range r.convs {
		v, err := r.convs[i].value(vals[i])
		if err != nil {
			return row, err
		}
		row = append(row, v)
	}
	return row, nil
}

// Mapper returns the compiled column mapping, which gives each event's
// rows of typed Go values.
func (r *RowMapper) Mapper() *mapping.Mapper { return r.m }
