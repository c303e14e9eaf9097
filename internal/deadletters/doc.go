// Package deadletters is what `ehsink deadletters list | show | replay`
// needs of a sink's dead-letter store, and the configuration revision the
// runner hands a sink with the letters it stores.
//
// A sink whose store the commands can read implements [Store] on the value
// its driver's New returns (the PostgreSQL and Iceberg sinks do); the CLI finds it by
// type assertion, so the contract stays out of the public sinks package.
// Letters a sink cannot mark in the commit that writes their rows (the
// runner's dead-letter files, [Files]; the Parquet sink's, a [Source]) are
// replayed by [WriterStore] through the sink's own writer of the letter's
// [ReplayPartition], whose watermark is the mark.
package deadletters
