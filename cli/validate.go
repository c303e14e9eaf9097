package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
)

const validateUsage = `Usage: ehsink validate [-c connectors.yaml] [--print]

Checks a config file as 'ehsink run' would load it (EHSINK_ environment
overrides and ${VAR} references included) and reports every problem at once,
each with its path:

  connectors[1].sink.table: required

It prints "ok" when the file is valid. --print prints the effective config
instead: defaults filled in, every secret shown as ***, followed by the SQL
each PostgreSQL connector runs when it starts (state tables, tombstone
table, and the table create_table derives from the mapping), as comments.
A sink with columns: auto lists the columns its reader_schema derives.

Exit status: 0 valid, 2 invalid or bad usage.
`

// runValidate is `ehsink validate`.
func (o Options) runValidate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet(ctx, "validate", validateUsage)
	path := fs.String("c", "connectors.yaml", "the config `file`")
	print := fs.Bool("print", false, "print the effective config (defaults filled, secrets as ***)")
	if code, ok := fs.parse(args, stdout, stderr); !ok {
		return code
	}
	cfg, err := o.load(*path)
	if err != nil {
		printProblems(stderr, *path, err)
		return exitUsage
	}
	if *print {
		if err := errors.Join(cfg.Print(stdout), cfg.PrintDerived(stdout), cfg.PrintDDL(stdout)); err != nil {
			fmt.Fprintf(stderr, "ehsink validate: %v\n", err)
			return exitFailure
		}
		return exitOK
	}
	fmt.Fprintln(stdout, "ok")
	return exitOK
}
