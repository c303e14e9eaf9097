// Package sinks is the contract between the ehsink runner and the sinks it
// writes to, and the registry that maps a connector's `sink.type` to a sink
// implementation, in the manner of database/sql and its drivers. It holds
// what a sink author needs and nothing else; docs/writing-a-sink.md walks
// through writing one.
//
// A sink package registers a [Driver] in its init function:
//
//	func init() { sinks.Register("mysink", driver{}) }
//
// and a binary that imports it (and calls cli.Main) can run connectors with
// `sink: {type: mysink, ...}`. The runner asks the driver for a config value
// ([Driver.NewConfig]), decodes the connector's `sink:` block into it
// (strictly: unknown keys are errors), validates it ([Validator]), and
// builds the sink ([Driver.New]). For every partition it owns, the runner
// opens one [Writer] and drives it:
//
//	Open -> (Write -> Flush)* -> Close
//
// Open reports the watermark the sink itself has durably committed for the
// partition, so the runner can drop events the sink already holds; Flush
// commits everything written and returns the new watermark, and only then
// does the runner checkpoint. That ordering is what turns at-least-once
// delivery into effectively-once output. [Position] is a place in a
// partition; [Covers], [Later] and [After] compare events and batches with a
// watermark.
//
// Optional capabilities are small interfaces a writer may implement, found by
// type assertion:
//
//   - [DeadLetterer]: the writer stores dead letters itself, in the same commit
//     as its data (for example a table written in the same transaction).
//   - [Batcher]: the writer gathers several batches into one commit (a Parquet
//     file) and tells the runner when a flush is due.
//
// A sink whose calls can take longer than errors.sink_timeout on a slow but
// working path reports its destination's answers with [Progress]; the
// runner then bounds the silence between answers rather than the call.
//
// Package sinktest is the conformance kit a sink runs in its tests.
//
// This package depends on nothing else in ehsink.
package sinks
