// Package parquetfile is what the sinks that write Parquet data files
// (parquet, delta) share about those files: the Parquet schema of a column
// mapping, the conversion of mapped values to Parquet values, the
// compression codecs and the writer options that keep statistics correct
// and memory bounded. One owner, so that a Delta table's files and a
// Parquet sink's files have the same column types, which the readers'
// checks in internal/parquettest expect of both.
package parquetfile
