package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestTestCommand runs `ehsink test` over the shipped config and its tests
// (connectors_test.yaml found by its default name) and over the package's
// passing, failing and malformed files, for the exit status of each.
func TestTestCommand(t *testing.T) {
	root := ".."
	data := filepath.Join(root, "internal", "conntest", "testdata")
	cfg := filepath.Join(data, "connectors.yaml")
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stdout string // a substring of stdout
		stderr string // a substring of stderr
	}{
		{"shipped", []string{"-c", filepath.Join(root, "connectors.yaml")}, exitOK, "cases passed", ""},
		{"debezium example", []string{"-c", filepath.Join(root, "examples", "debezium", "connectors.yaml")}, exitOK, "4 cases passed", ""},
		{"pass", []string{"-c", cfg, "--tests", filepath.Join(data, "pass.yaml")}, exitOK, "4 cases passed", ""},
		{"fail", []string{"-c", cfg, "--tests", filepath.Join(data, "fail.yaml")}, exitFailure, "column amount: want 12.49, got 12.50", ""},
		{"malformed", []string{"-c", cfg, "--tests", filepath.Join(data, "malformed.yaml")}, exitUsage, "", "tests[0].connector: unknown connector"},
		{"no test file", []string{"-c", cfg}, exitUsage, "", "connectors_test.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := cli(t, append([]string{"test"}, tc.args...)...)
			if code != tc.code || !strings.Contains(out, tc.stdout) || !strings.Contains(errOut, tc.stderr) {
				t.Errorf("exit %d (want %d), stdout:\n%s\nstderr:\n%s", code, tc.code, out, errOut)
			}
		})
	}
}
