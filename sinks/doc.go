// Package sinks holds the contract between the ehsink runner and the sinks it
// writes to, and the registry that maps a connector's `sink.type` to a sink
// implementation, in the manner of database/sql and its drivers.
//
// A sink package registers a [Driver] in its init function:
//
//	func init() { sinks.Register("postgres", driver{}) }
//
// The runner then asks the driver for a config value ([Driver.NewConfig]),
// decodes the connector's `sink:` block into it (strictly: unknown keys are
// errors), validates it ([Validator]), and builds the sink ([Driver.New]).
// For every partition it owns, the runner opens one [Writer] and drives it:
//
//	Open -> (Write -> Flush)* -> Close
//
// Open reports the watermark the sink itself has durably committed for the
// partition, so the runner can drop events the sink already holds; Flush
// commits everything written and returns the new watermark, and only then does
// the runner checkpoint. That ordering is what turns at-least-once delivery
// into effectively-once output.
//
// Optional capabilities are small interfaces a writer may implement, found by
// type assertion:
//
//   - [DeadLetterer]: the writer stores dead letters itself, in the same commit
//     as its data (for example a table written in the same transaction).
//   - [Batcher]: the writer gathers several batches into one commit (a Parquet
//     file) and tells the runner when a flush is due.
//
// This package depends on nothing else in ehsink.
package sinks
