// Package chaos_test is the chaos matrix: three `ehsink run` replicas (a
// PostgreSQL append, a PostgreSQL upsert, a Parquet, an Iceberg and a
// Delta connector each on a hub of JSON events, and a PostgreSQL append
// with `columns: auto` on a hub of Avro events; the Iceberg catalog in
// PostgreSQL, checkpoints in Azurite) read an emulator running as its own
// process (with its schema registry) while producers send events, poison
// ones among them, the Avro ones switching to a schema that adds a field
// in the middle of act 1, and faults are applied,
// several at once: kill -9 of replicas, a SIGTERM restart, PostgreSQL,
// Azurite and the emulator crashed and restarted, the emulator's admin
// faults, a failure during a partition claim, a replica started while its
// sink is down. Then (act 2) network partitions: each replica reaches each
// dependency through a fault proxy of its own, and replicas are cut off
// one or two at a time (blackhole, blackhole mid-transaction, reset,
// latency, bandwidth, during a rebalance, every replica from PostgreSQL),
// while a monitor checks that no partition stays unread longer than its
// scenario's bound while a healthy replica exists. Once every partition is
// caught up with its hub, the output is checked against the hubs, read back
// through their own consumer group.
//
// `make chaos-short` (EHSINK_CHAOS=short) runs the short matrix, `make
// chaos` the full one, and `make test` the short one for one strategy
// (make chaos-ci). Without EHSINK_CHAOS, `go test ./test/chaos` skips it,
// except with CI=true, where it runs the short matrix.
// Knobs (environment): EHSINK_CHAOS=short|full, EHSINK_CHAOS_EVENTS,
// EHSINK_CHAOS_DURATION, EHSINK_CHAOS_BALANCING (comma-separated
// strategies), EHSINK_CHAOS_PARTITIONS, EHSINK_CHAOS_CATCHUP (the bound
// after the producer stops), EHSINK_CHAOS_CHECK_POISON=0 (no rows that
// PostgreSQL rejects), EHSINK_CHAOS_SEED, EHSINK_CHAOS_KEEP=1 (keep the run
// directory with every process's log).
package chaos_test
