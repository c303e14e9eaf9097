package conntest

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/ehsink/ehsink/internal/connector"
	_ "github.com/ehsink/ehsink/sinks/iceberg"
	_ "github.com/ehsink/ehsink/sinks/parquet"
	_ "github.com/ehsink/ehsink/sinks/postgres"
	_ "github.com/ehsink/ehsink/sinks/stdout"
)

// loadConfig loads a config as `ehsink test` does, without the process
// environment.
func loadConfig(t *testing.T, path string) *connector.Config {
	t.Helper()
	cfg, err := connector.Load(path, connector.LoadOptions{Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatalf("load %s: %v", path, err)
	}
	return cfg
}

// runFile runs the test file at path against the config at cfgPath and
// returns the result, the report and the error.
func runFile(t *testing.T, cfgPath, path string) (Result, string, error) {
	t.Helper()
	var out strings.Builder
	res, err := RunFiles(context.Background(), cfgPath, connector.LoadOptions{Getenv: func(string) string { return "" }}, path, &out)
	return res, out.String(), err
}

func TestRunFilesNamesABadConfig(t *testing.T) {
	_, _, err := runFile(t, "testdata/missing.yaml", "testdata/pass.yaml")
	if err == nil || !strings.Contains(err.Error(), "testdata/missing.yaml") {
		t.Fatalf("err = %v, want one naming testdata/missing.yaml", err)
	}
}

func TestPassingFile(t *testing.T) {
	res, out, err := runFile(t, "testdata/connectors.yaml", "testdata/pass.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed != 0 || res.Cases != 4 {
		t.Errorf("result %+v, want 4 cases, none failed; report:\n%s", res, out)
	}
	if !strings.HasSuffix(out, "ok testdata/pass.yaml: 4 cases passed\n") {
		t.Errorf("report does not end with the ok line:\n%s", out)
	}
}

func TestFailingFilePrintsDiff(t *testing.T) {
	res, out, err := runFile(t, "testdata/connectors.yaml", "testdata/fail.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed != 3 || res.Cases != 4 {
		t.Errorf("result %+v, want 3 of 4 cases failed", res)
	}
	want, err := os.ReadFile("testdata/fail.golden")
	if err != nil {
		t.Fatal(err)
	}
	if out != string(want) {
		t.Errorf("report:\n%s\nwant (testdata/fail.golden):\n%s", out, want)
	}
}

// problemPaths returns the paths of a *MalformedError's problems.
func problemPaths(t *testing.T, err error) []string {
	t.Helper()
	var me *MalformedError
	if !errors.As(err, &me) {
		t.Fatalf("error %v (%T), want a *MalformedError", err, err)
	}
	var paths []string
	for _, p := range me.Problems {
		paths = append(paths, p.Path)
	}
	return paths
}

func TestMalformedFileNamesEveryBadField(t *testing.T) {
	_, out, err := runFile(t, "testdata/connectors.yaml", "testdata/malformed.yaml")
	if out != "" {
		t.Errorf("a malformed file ran cases:\n%s", out)
	}
	want := []string{
		"tests[0].connector",
		"tests[1].expect[0].row.amonut",
		"tests[1].expect[0].row.seq",
		"tests[1].expect[1]",
		"tests[2].name",
		"tests[2].expect",
		"tests[2].expect[0].row",
	}
	if got := problemPaths(t, err); !slices.Equal(got, want) {
		t.Errorf("problem paths %q, want %q\n%v", got, want, err)
	}
	if msg := err.Error(); !strings.Contains(msg, "did you mean amount?") || !strings.HasPrefix(msg, "testdata/malformed.yaml: ") {
		t.Errorf("message does not name the file or suggest the column:\n%s", msg)
	}
}

func TestUndecodableFile(t *testing.T) {
	_, err := ReadFile("testdata/undecodable.yaml")
	want := []string{"tests[0].events[0].enqueued_time", "tests[0].events[0].sequence"}
	if got := problemPaths(t, err); !slices.Equal(got, want) {
		t.Errorf("problem paths %q, want %q\n%v", got, want, err)
	}
}

// The shipped connectors.yaml and its tests: `make test` runs them here.
func TestShippedConfig(t *testing.T) {
	res, out, err := runFile(t, "../../connectors.yaml", "../../connectors_test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed != 0 || res.Cases == 0 {
		t.Errorf("result %+v; report:\n%s", res, out)
	}
}

func TestDefaultPath(t *testing.T) {
	for in, want := range map[string]string{
		"connectors.yaml":  "connectors_test.yaml",
		"deploy/prod.yml":  "deploy/prod_test.yml",
		"dir.d/connectors": "dir.d/connectors_test",
	} {
		if got := DefaultPath(in); got != want {
			t.Errorf("DefaultPath(%q) = %q, want %q", in, got, want)
		}
	}
}
