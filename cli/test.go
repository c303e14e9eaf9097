package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/ehsink/ehsink/internal/connector"
	"github.com/ehsink/ehsink/internal/conntest"
)

const testUsage = `Usage: ehsink test [-c connectors.yaml] [--tests connectors_test.yaml]

Runs the unit tests of a config: each case of the test file gives events to
one connector and says the row, record or dead letter it must make of each.
The events go through the connector's own mapping (and the stdout sink's
envelope); no Event Hubs, database or storage is needed. The config is loaded as
'ehsink run' loads it, less the parts the tests never use (emulator, and each
connector's source and checkpoint): their ${VAR} references need not be set.

  tests:
    - name: an order becomes a row
      connector: orders-to-parquet
      events:
        - body: {order_id: o-1, amount: 12.5, customer: {id: c-7}}
          key: c-7
          properties: {source: web}
          partition: "2"
          sequence_number: 41
          enqueued_time: 2026-03-01T10:00:00Z
      expect:
        - row: {order_id: o-1, amount: 12.5, customer: c-7, seq: 41}
    - name: an amount that is not a number is a dead letter
      connector: orders-to-parquet
      events: [{body: {order_id: o-2, amount: lots}}]
      expect: [{dead_letter: 'column "amount"'}]

An event the connector's filter drops expects filtered: true; an event whose
mapping explodes an array expects rows: [{...}, ...] (one per element) or
elements: [{row: ...}, {dead_letter: ...}]; an event that deletes its key
(format: debezium, or a delete block) expects delete: {KEY: VALUE}, and a
Debezium tombstone skipped: true.

A failing case prints, per event, the expected and the actual value of each
column that differs. The test file defaults to the config's name with _test
before the extension.

Exit status: 0 every case passed, 1 a case failed, 2 an invalid config or
test file (every problem with its path) or bad usage.
`

// runTest is `ehsink test`.
func runTest(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet(ctx, "test", testUsage)
	path := fs.String("c", "connectors.yaml", "the config `file`")
	tests := fs.String("tests", "", "the test `file` (default: the config's name with _test, such as connectors_test.yaml)")
	if code, ok := fs.parse(args, stdout, stderr); !ok {
		return code
	}
	if *tests == "" {
		*tests = conntest.DefaultPath(*path)
	}
	cfg, err := connector.Load(*path, connector.LoadOptions{Ignore: unusedByTest})
	if err != nil {
		printProblems(stderr, *path, err)
		return exitUsage
	}
	f, err := conntest.ReadFile(*tests)
	if err == nil {
		var res conntest.Result
		if res, err = conntest.Run(ctx, cfg, *tests, f, stdout); err == nil && res.Failed > 0 {
			return exitFailure
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "ehsink test: %v\n", err)
		return exitUsage
	}
	return exitOK
}

// unusedByTest reports whether `ehsink test` never reads a config path:
// it connects to no event hub and stores no checkpoint, so the problems of
// the emulator block and of each connector's source and checkpoint (an
// unset EVENTHUB_CONNECTION) are not its problems.
func unusedByTest(path string) bool {
	under := func(p, prefix string) bool {
		return p == prefix || strings.HasPrefix(p, prefix+".") || strings.HasPrefix(p, prefix+"[")
	}
	if under(path, "emulator") {
		return true
	}
	rest, ok := strings.CutPrefix(path, "connectors[")
	if !ok {
		return false
	}
	if _, rest, ok = strings.Cut(rest, "]."); !ok {
		return false
	}
	return under(rest, "source") || under(rest, "checkpoint")
}
