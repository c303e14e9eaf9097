// Package sinktest is the conformance kit every sink runs, built-in or
// custom, and an in-memory sink for tests of code that drives sinks.
//
// A sink package calls [Run] from a test with a [Harness] that can build the
// sink and read back what it durably holds:
//
//	func TestConformance(t *testing.T) {
//		sinktest.Run(t, sinktest.Harness{
//			New:       func(t *testing.T) sinks.Sink { ... },
//			Committed: func(t *testing.T, partition string) []int64 { ... },
//		})
//	}
//
// The kit writes events made by [Event]: their JSON bodies have the fields
// id (string), seq (number), customer (string), amount (number) and ts
// (RFC 3339 time), so a harness maps its columns from those paths.
//
// The cases are named subtests: a restart sees what was flushed and nothing
// else, a replay after a crash writes nothing twice, order holds per
// partition, partitions do not disturb each other, and a rejected event is
// reported by index and still moves the watermark once dead-lettered. With
// [Harness.Fencing], two owners of one partition write nothing twice:
// opening at once from no watermark or from the same watermark, and an
// owner that lost the partition flushing after the new owner committed
// (the new owner's commits and watermark must survive it). With
// [Harness.InterruptCommit], a process killed between the sink's data commit
// and its watermark loses and repeats nothing on the next start.
//
// A harness declares what its sink can do; a case the sink cannot meet is
// skipped, never passed. The kit's own tests run each case against
// deliberately broken sinks (one that forgets its state, one whose fence is
// removed) and see it fail.
package sinktest
