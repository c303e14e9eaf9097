package parquet

import (
	pq "github.com/parquet-go/parquet-go"

	"github.com/ehsink/ehsink/mapping"
	"github.com/ehsink/ehsink/sinks"
)

// rowMapper turns events into Parquet rows: the shared mapping gives typed
// Go values, the converters give Parquet values in schema order. It is safe
// for concurrent use.
type rowMapper struct {
	m     *mapping.Mapper
	convs []converter
}

func newRowMapper(cols mapping.Columns) (*rowMapper, error) {
	m, err := mapping.Compile(cols)
	if err != nil {
		return nil, err
	}
	return &rowMapper{m: m, convs: newConverters(cols)}, nil
}

// mapEvent maps e into vals (reused when it has the capacity).
func (r *rowMapper) mapEvent(e *sinks.Event, vals []any) ([]any, error) {
	if cap(vals) < len(r.convs) {
		vals = make([]any, len(r.convs))
	}
	vals = vals[:len(r.convs)]
	return vals, r.m.Map(e, vals)
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
