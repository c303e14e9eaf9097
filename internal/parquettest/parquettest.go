// Package parquettest reads Parquet files for tests with arrow-go, an
// implementation independent of the parquet-go writer the Parquet sink
// uses, so that a file the writer gets wrong is not read back by the same
// mistake.
package parquettest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// Table is a whole file: its schema's fields, its rows by column name, and
// its key-value metadata.
type Table struct {
	Fields []arrow.Field
	Rows   []map[string]any
	Meta   map[string]string
}

// ReadFile reads the Parquet file at path; see [Read].
func ReadFile(path string) (Table, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Table{}, err
	}
	return Read(data)
}

// Read reads a whole Parquet file. Values come out as string, int32,
// int64, float64, bool, time.Time (UTC), []byte, a decimal as
// UNSCALEDe-SCALE (exact, with no formatting choices), or nil. A file
// whose column chunks do not name their columns is an error (see
// [CheckPaths]), although arrow-go itself would read it.
func Read(data []byte) (Table, error) {
	rdr, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		return Table{}, fmt.Errorf("arrow-go cannot open it: %w", err)
	}
	defer rdr.Close()
	if err := checkPaths(rdr); err != nil {
		return Table{}, err
	}
	tb := Table{Meta: map[string]string{}}
	kv := rdr.MetaData().KeyValueMetadata()
	for i, k := range kv.Keys() {
		tb.Meta[k] = kv.Values()[i]
	}
	fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		return Table{}, fmt.Errorf("arrow-go: %w", err)
	}
	at, err := fr.ReadTable(context.Background())
	if err != nil {
		return Table{}, fmt.Errorf("arrow-go cannot read it: %w", err)
	}
	defer at.Release()
	tb.Fields = at.Schema().Fields()
	tb.Rows = make([]map[string]any, int(at.NumRows()))
	for i := range tb.Rows {
		tb.Rows[i] = map[string]any{}
	}
	for c := range int(at.NumCols()) {
		col := at.Column(c)
		row := 0
		for _, chunk := range col.Data().Chunks() {
			for i := range chunk.Len() {
				tb.Rows[row][col.Name()] = value(chunk, i)
				row++
			}
		}
	}
	return tb, nil
}

// CheckPaths checks that every column chunk of every row group in the
// Parquet file data names its column: its path_in_schema equals the path
// of the schema leaf at its position. arrow-go, parquet-go and DuckDB find
// a chunk's column by position and read a file that gets this wrong;
// Spark, Athena and hyparquet find it by path and refuse the file
// (parquet-go v0.32.0 wrote such files after GenericWriter.Reset,
// parquet-go/parquet-go#602).
func CheckPaths(data []byte) error {
	rdr, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("arrow-go cannot open it: %w", err)
	}
	defer rdr.Close()
	return checkPaths(rdr)
}

func checkPaths(rdr *file.Reader) error {
	md := rdr.MetaData()
	for rg := range md.NumRowGroups() {
		g := md.RowGroup(rg)
		if g.NumColumns() != md.Schema.NumColumns() {
			return fmt.Errorf("row group %d has %d column chunks, the schema %d leaves", rg, g.NumColumns(), md.Schema.NumColumns())
		}
		for c := range g.NumColumns() {
			chunk, err := g.ColumnChunk(c)
			if err != nil {
				return fmt.Errorf("row group %d column chunk %d: %w", rg, c, err)
			}
			want := md.Schema.Column(c).ColumnPath()
			if got := chunk.PathInSchema(); !slices.Equal(got, want) {
				return fmt.Errorf("row group %d column chunk %d: path_in_schema %q, want %q (the schema leaf at its position)", rg, c, got.String(), want.String())
			}
		}
	}
	return nil
}

func value(a arrow.Array, i int) any {
	if a.IsNull(i) {
		return nil
	}
	switch x := a.(type) {
	case *array.String:
		return x.Value(i)
	case *array.Int32:
		return x.Value(i)
	case *array.Int64:
		return x.Value(i)
	case *array.Float64:
		return x.Value(i)
	case *array.Boolean:
		return x.Value(i)
	case *array.Timestamp:
		unit := x.DataType().(*arrow.TimestampType).Unit
		return x.Value(i).ToTime(unit).UTC()
	case *array.Decimal128:
		return fmt.Sprintf("%se-%d", x.Value(i).BigInt(), x.DataType().(*arrow.Decimal128Type).Scale)
	case *array.Binary:
		return slices.Clone(x.Value(i))
	case *array.FixedSizeBinary:
		return slices.Clone(x.Value(i))
	}
	return a.ValueStr(i)
}
