package parquetfile

import (
	pq "github.com/parquet-go/parquet-go"

	"github.com/ehsink/ehsink/internal/table/mapping"
)

// DictionaryMaxBytes is the most a column's dictionary holds in a row
// group before its pages fall back to plain encoding. parquet-go's
// default is no limit: a column of unique values (an ID, a timestamp)
// then kept every value and its hash table for the whole row group,
// beyond what row_group_size counts (about 180 MiB of a 243 MiB heap
// with 250,000-row files on 4 partitions, 574 MiB peak RSS). In
// bench-e2e (1M events, 4 partitions, files of 250,000 rows) the peak
// RSS was 292 MiB at 256 KiB (the hash tables of 8-byte columns still
// held 20 MiB) and 244 MiB at 64 KiB. A column that pays for a
// dictionary (a few thousand distinct values) stays below the limit.
const DictionaryMaxBytes = 64 << 10

// BoundsOptions leaves min/max statistics (chunk statistics, page
// statistics and the column index) out for decimals over 18 digits.
// parquet-go v0.32.0 orders those FIXED_LEN_BYTE_ARRAY values as unsigned
// bytes where the format says signed two's complement, so a column with
// negative and positive values gets a minimum above its maximum
// (parquet-go/parquet-go#592, fixed after v0.32.0), and an engine that
// skips row groups by statistics drops matching rows. No statistics is
// correct; wrong ones are not. The null counts stay.
func BoundsOptions(cols mapping.Columns) []pq.WriterOption {
	var opts []pq.WriterOption
	for _, c := range cols {
		if c.Type.Kind == mapping.KindDecimal && c.Type.Precision > 18 {
			opts = append(opts, pq.SkipPageBounds(c.Name), pq.SkipPageStatistics(c.Name))
		}
	}
	return opts
}
