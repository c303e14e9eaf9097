package parquettest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ehsink/ehsink/internal/table/mapping"
)

// Column is what a file's column must be, as the column mapping promises
// it, in the terms of the Parquet format: the physical type, the logical
// type in hyparquet's spelling of the footer's LogicalType, and whether it
// is optional. check.mjs compares every file's footer with a list of them.
type Column struct {
	Name       string         `json:"name"`
	Physical   string         `json:"physical"`
	TypeLength int            `json:"type_length,omitempty"`
	Logical    map[string]any `json:"logical,omitempty"`
	Nullable   bool           `json:"nullable"`
	// NoBounds: the column has no min/max statistics (and must not have
	// them); its null counts are still checked.
	NoBounds bool `json:"no_bounds,omitempty"`
}

// Expect returns the columns a file written for cols must have. It is
// written from the Parquet format's rules, not from the sink's schema
// code, so that a change of the sink's types fails a test.
func Expect(cols mapping.Columns) []Column {
	out := make([]Column, len(cols))
	for i, c := range cols {
		e := Column{Name: c.Name, Nullable: c.Nullable}
		switch t := c.Type; t.Kind {
		case mapping.KindString, mapping.KindJSON:
			e.Physical, e.Logical = "BYTE_ARRAY", map[string]any{"type": "STRING"}
		case mapping.KindInt32:
			e.Physical, e.Logical = "INT32", map[string]any{"type": "INTEGER", "bitWidth": 32, "isSigned": true}
		case mapping.KindInt64:
			e.Physical, e.Logical = "INT64", map[string]any{"type": "INTEGER", "bitWidth": 64, "isSigned": true}
		case mapping.KindDouble:
			e.Physical = "DOUBLE"
		case mapping.KindBoolean:
			e.Physical = "BOOLEAN"
		case mapping.KindTimestamp:
			unit := "MICROS"
			if t.Unit == mapping.Millis {
				unit = "MILLIS"
			}
			// Every instant is written in UTC, and says so.
			e.Physical, e.Logical = "INT64", map[string]any{"type": "TIMESTAMP", "isAdjustedToUTC": true, "unit": unit}
		case mapping.KindUUID:
			e.Physical, e.TypeLength, e.Logical = "FIXED_LEN_BYTE_ARRAY", 16, map[string]any{"type": "UUID"}
		case mapping.KindBytes:
			e.Physical = "BYTE_ARRAY"
		case mapping.KindDecimal:
			e.Logical = map[string]any{"type": "DECIMAL", "precision": t.Precision, "scale": t.Scale}
			switch {
			case t.Precision <= 9:
				e.Physical = "INT32"
			case t.Precision <= 18:
				e.Physical = "INT64"
			default:
				// The fewest bytes that hold 10^precision-1 and its sign.
				e.Physical = "FIXED_LEN_BYTE_ARRAY"
				e.TypeLength = int(math.Ceil((math.Ceil(float64(t.Precision)*math.Log2(10)) + 1) / 8))
				// parquet-go v0.32.0 orders these as unsigned bytes and
				// writes wrong bounds (parquet-go/parquet-go#592); the sink
				// leaves them out.
				e.NoBounds = true
			}
		default:
			panic(fmt.Sprintf("parquettest: no expectation for type %s", t))
		}
		out[i] = e
	}
	return out
}

// Report is what check.mjs found.
type Report struct {
	Files  int      `json:"files"`  // files both readers read without a finding
	Chunks int      `json:"chunks"` // column chunks checked by each reader
	Rows   int      `json:"rows"`
	Errors []string `json:"errors"`
}

// readersTimeout bounds one run of node; a hang bound, not a speed
// assertion.
const readersTimeout = 5 * time.Minute

// CheckWithReaders runs check.mjs, with hyparquet and DuckDB, over files
// (name -> contents), every one of which must have the columns want. It
// fails t on any finding and returns the report. node and the pinned
// packages come from <repo>/.tools (scripts/install-tools.sh); when they
// are missing the test is skipped, or failed when CI=true.
func CheckWithReaders(t testing.TB, want []Column, files map[string][]byte) Report {
	t.Helper()
	node, modules, script := readers(t)
	dir := t.TempDir()
	args := []string{script, filepath.Join(dir, "expected.json")}
	spec, err := json.Marshal(map[string]any{"columns": want})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(args[1], spec, 0o600); err != nil {
		t.Fatal(err)
	}
	i := 0
	for name, data := range files {
		// Flat names: the readers see each file as its own.
		p := filepath.Join(dir, fmt.Sprintf("%04d-%s", i, strings.ReplaceAll(name, "/", "_")))
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, p)
		i++
	}
	ctx, cancel := context.WithTimeout(context.Background(), readersTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Env = append(os.Environ(), "EHSINK_NODE_MODULES="+modules)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var r Report
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("check.mjs: %v; no report (%v)\nstdout: %s\nstderr: %s", runErr, err, stdout.String(), stderr.String())
	}
	for _, e := range r.Errors {
		t.Errorf("check.mjs: %s", e)
	}
	if runErr != nil && len(r.Errors) == 0 {
		t.Errorf("check.mjs: %v\nstderr: %s", runErr, stderr.String())
	}
	if r.Files != len(files) {
		t.Errorf("check.mjs read %d files, want %d", r.Files, len(files))
	}
	return r
}

// readers finds node, the .tools/node_modules folder and check.mjs.
func readers(t testing.TB) (node, modules, script string) {
	t.Helper()
	missing := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...) + "; run make tools (scripts/install-tools.sh)"
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s (CI=true, so this is a failure)", msg)
		}
		t.Skipf("%s", msg)
	}
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("parquettest: cannot locate its own source")
	}
	script = filepath.Join(filepath.Dir(self), "check.mjs")
	root := filepath.Dir(self)
	for {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			break
		}
		if filepath.Dir(root) == root {
			t.Fatalf("parquettest: no go.mod above %s", self)
		}
		root = filepath.Dir(root)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("node not found on PATH")
	}
	modules = filepath.Join(root, ".tools", "node_modules")
	for _, pkg := range []string{"hyparquet", "hyparquet-compressors", "@duckdb/node-api"} {
		if _, err := os.Stat(filepath.Join(modules, filepath.FromSlash(pkg), "package.json")); err != nil {
			missing("%s is not installed in %s", pkg, modules)
		}
	}
	return node, modules, script
}

// DuckDB runs one SQL query in DuckDB (its Node.js API, from .tools) and
// returns the rows, each column as DuckDB's JSON form of its value. A
// query error fails t. Like [CheckWithReaders], it skips t when the
// readers are not installed, or fails it when CI=true.
func DuckDB(t testing.TB, query string) []map[string]any {
	t.Helper()
	var rows []map[string]any
	runScript(t, "query.mjs", []string{query}, &rows)
	return rows
}

// HyparquetFile is one file as hyparquet reads it: the names of its
// columns, in the file's order, and its rows by column name.
type HyparquetFile struct {
	File    string           `json:"file"`
	Columns []string         `json:"columns"`
	Rows    []map[string]any `json:"rows"`
}

// Hyparquet reads the files at paths with hyparquet (rows.mjs), which
// resolves every column chunk by its path, as Spark does. A value comes
// out in JSON terms: an int64 as a string, a timestamp as RFC 3339 text, a
// decimal as a float64, a UUID as its text, other bytes as hex. Like
// [CheckWithReaders], it skips t when the readers are not installed, or
// fails it when CI=true.
func Hyparquet(t testing.TB, paths ...string) []HyparquetFile {
	t.Helper()
	var files []HyparquetFile
	runScript(t, "rows.mjs", paths, &files)
	return files
}

// runScript runs one of the package's node scripts with args and decodes
// its JSON output into out; a failure fails t.
func runScript(t testing.TB, script string, args []string, out any) {
	t.Helper()
	node, modules, check := readers(t)
	ctx, cancel := context.WithTimeout(context.Background(), readersTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{filepath.Join(filepath.Dir(check), script)}, args...)...)
	cmd.Env = append(os.Environ(), "EHSINK_NODE_MODULES="+modules)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %q: %v\n%s", script, args, err, stderr.String())
	}
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		t.Fatalf("%s %q: %v\n%s", script, args, err, stdout.String())
	}
}
