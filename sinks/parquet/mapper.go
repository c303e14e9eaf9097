package parquet

import (
	pq "github.com/parquet-go/parquet-go"

	"github.com/ehsink/ehsink/internal/table/mapping"
)

// rowMapper turns events into Parquet rows: the shared mapping gives typed
// Go values, the converters give Parquet values in schema order. It is safe
// for concurrent use.
type rowMapper struct {
	m     *mapping.Mapper
	convs []converter
}

func newRowMapper(cols mapping.Columns, explode mapping.Path) (*rowMapper, error) {
	m, err := mapping.CompileWith(cols, mapping.Options{Explode: explode})
	if err != nil {
		return nil, err
	}
	return &rowMapper{m: m, convs: newConverters(cols)}, nil
}

// mapRow maps row j of an event into the Parquet values appended to row,
// through vals (reused when it has the capacity). A failure of an exploded
// element names the element.
func (r *rowMapper) mapRow(rows *mapping.Rows, j int, row pq.Row, vals []any) (pq.Row, []any, error) {
	if cap(vals) < len(r.convs) {
		vals = make([]any, len(r.convs))
	}
	vals = vals[:len(r.convs)]
	if err := rows.Map(j, vals); err != nil {
		return row, vals, err
	}
	row, err := r.appendRow(row, vals)
	if err != nil && rows.Exploded() {
		err = &mapping.ElementError{Index: j, Err: err}
	}
	return row, vals, err
}

// check reports whether the Parquet values of a mapped row convert, as
// appendRow does (for `ehsink test`).
func (r *rowMapper) check(vals []any) error {
	_, err := r.appendRow(make(pq.Row, 0, len(r.convs)), vals)
	return err
}

// appendRow appends the Parquet values of vals to row.
func (r *rowMapper) appendRow(row pq.Row, vals []any) (pq.Row, error) {
	for i := range r.convs {
		v, err := r.convs[i].value(vals[i])
		if err != nil {
			return row, err
		}
		row = append(row, v)
	}
	return row, nil
}
