package cli

// The tests run the commands over the built-in sinks, as cmd/ehsink does.
import (
	_ "github.com/ehsink/ehsink/sinks/delta"
	_ "github.com/ehsink/ehsink/sinks/iceberg"
	_ "github.com/ehsink/ehsink/sinks/parquet"
	_ "github.com/ehsink/ehsink/sinks/postgres"
	_ "github.com/ehsink/ehsink/sinks/stdout"
)
