// Package e2e holds `make bench-e2e`: ehsink measured end to end against
// raw baselines of its source and sinks, in one run, on one machine.
//
// BenchmarkE2E (bench_test.go) builds the ehsink binary, starts
// `ehsink emulator` as its own process, loads a backlog of EVENTS order
// events (default 1,000,000, the same number in each of 4 partitions), and
// then measures, each timed from its process start (or first statement) to
// its last event:
//
//   - the raw SDK drain: a child process with one PartitionClient per
//     partition, each asking only for what its partition still holds (at
//     most the source's default batch per call, with its default
//     prefetch), spread over as many ConsumerClients (AMQP connections) as
//     ehsink's default source.connections opens on this machine; the
//     median of several drains is the source ceiling; with more than one
//     connection, the median drain over a single connection is shown too;
//   - raw pgx.CopyFrom of the same rows (the append sink ceiling) and a raw
//     merge done by hand: the sink's INSERT … SELECT FROM unnest(one array
//     per column) ON CONFLICT, with the same ordering guard and watermark
//     fence, the arrays encoded by pgx from typed slices (the upsert sink
//     ceiling);
//   - the raw pipelines: the drain child writing each batch as a consumer
//     written by hand would, decoding the orders with encoding/json, then
//     one COPY (append) or one fenced merge transaction (upsert) per
//     batch, the next batch received meanwhile; they share the cores with
//     the emulator and the server as ehsink does, and are the ceiling of
//     ehsink on this machine (min(source, sink) assumes each side has the
//     machine to itself);
//   - `ehsink run` into PostgreSQL append, PostgreSQL upsert, Parquet and
//     Iceberg (a sql catalog on SQLite, a local warehouse), with default
//     settings but for the load-balancing strategy (greedy, as for one
//     replica) and, for Parquet and Iceberg, max_rows set to the events of
//     one partition so that the last event of a partition closes its file
//     or commit (the Iceberg run logs what its warehouse then holds);
//     the end is the moment the sink watermark of every partition, read
//     from ehsink's /metrics, reaches the partition's last event;
//   - `ehsink send --demo --count EVENTS` into a second hub (memory).
//
// SCALE=1,2,4 adds, for each number of connections, a raw drain and
// ehsink into PostgreSQL append with source.connections set; PPROF=DIR
// writes a CPU and a heap profile of each ehsink run (the CPU profile over
// its first PPROF_SECONDS, default 20: set it below the run's length, or
// there is none); LOGS=DIR keeps each
// ehsink run's log, at debug level; PIN=1 runs every measured process
// (drains, pipelines, ehsink) on CPU 0 and the emulator and PostgreSQL on
// CPU 1 (taskset), so that no measured process shares its core with a
// server. An ehsink row's CPU per event shows, in brackets, the figure
// after its start (the CPU it spent before its operations API answered,
// about 0.2 s, left out).
// EHSINK_BENCH_BASE_BIN=PATH[,PATH...] adds each ehsink run made with other
// binaries (an earlier commit's, built in its own worktree), named in
// their rows after their commit, against the same baselines; REPEAT=N
// measures every ehsink run N times, the binaries taking turns, with a raw
// drain before each turn after the first (counted into the source
// ceiling), and shows the median of each.
//
// It prints a table of events/s, the ratio to min(source ceiling, sink
// ceiling) and to the raw pipeline, CPU µs per event against the raw
// drain's, the PostgreSQL server's CPU µs per row, the emulator's CPU µs
// per event over the run, and peak RSS. It needs Linux (/proc) and
// PostgreSQL from internal/testenv.
package e2e
