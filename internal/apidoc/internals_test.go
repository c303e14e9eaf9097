package apidoc

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// internalsDoc is the contributors' guide, relative to this package.
const internalsDoc = "../../docs/internals.md"

// maxTopLevel is the most top-level directories the tree may have.
const maxTopLevel = 12

// TestInternalsPackageMap keeps the package map of docs/internals.md in
// step with `go list ./...`: every package outside test/ has a row in the
// map's table (section "## Package map", first cell the package's
// directory in backticks), and every row names a package that exists.
func TestInternalsPackageMap(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.Dir}}", "../../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for dir := range strings.FieldsSeq(string(out)) {
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			t.Fatal(err)
		}
		rel = filepath.ToSlash(rel)
		if rel != "test" && !strings.HasPrefix(rel, "test/") {
			listed[rel] = true
		}
	}
	if len(listed) < 20 {
		t.Fatalf("go list found %d packages outside test/: %v", len(listed), listed)
	}
	text, err := os.ReadFile(internalsDoc)
	if err != nil {
		t.Fatal(err)
	}
	mapped := tableKeys(t, string(text), "## Package map")
	for pkg := range listed {
		if !mapped[pkg] {
			t.Errorf("package %s is not in the package map: add a row | `%s` | what lives there | to the table under \"## Package map\" in docs/internals.md", pkg, pkg)
		}
	}
	for pkg := range mapped {
		if !listed[pkg] {
			t.Errorf("docs/internals.md's package map names %s, which `go list ./...` does not list (outside test/)", pkg)
		}
	}
}

// TestInternalsTopLevel: every top-level directory (hidden ones and those
// the root .gitignore names aside) has
// a row under "## Top-level directories" in docs/internals.md saying why it
// is there, every row names one that exists, and there are at most
// maxTopLevel of them.
func TestInternalsTopLevel(t *testing.T) {
	entries, err := os.ReadDir("../..")
	if err != nil {
		t.Fatal(err)
	}
	// Build output and local state (/bin/, /node_modules/) are ignored by
	// the root .gitignore and are not part of the tree.
	gitignore, err := os.ReadFile("../../.gitignore")
	if err != nil {
		t.Fatal(err)
	}
	ignored := map[string]bool{}
	for line := range strings.SplitSeq(string(gitignore), "\n") {
		if line = strings.TrimSpace(line); strings.HasPrefix(line, "/") && strings.HasSuffix(line, "/") {
			ignored[strings.TrimPrefix(line, "/")] = true
		}
	}
	dirs := map[string]bool{}
	for _, e := range entries {
		if name := e.Name() + "/"; e.IsDir() && !strings.HasPrefix(name, ".") && !ignored[name] {
			dirs[name] = true
		}
	}
	text, err := os.ReadFile(internalsDoc)
	if err != nil {
		t.Fatal(err)
	}
	rows := tableKeys(t, string(text), "## Top-level directories")
	for d := range dirs {
		if !rows[d] {
			t.Errorf("top-level directory %s is not under \"## Top-level directories\" in docs/internals.md: add a row | `%s` | why it earns its place |", d, d)
		}
	}
	for d := range rows {
		if !dirs[d] {
			t.Errorf("docs/internals.md names top-level directory %s, which does not exist", d)
		}
	}
	if len(dirs) > maxTopLevel {
		t.Errorf("%d top-level directories, want at most %d", len(dirs), maxTopLevel)
	}
}

// tableKeys returns the backticked first cells of the table rows in the
// section of text that starts with heading (up to the next heading of the
// same level or above).
func tableKeys(t *testing.T, text, heading string) map[string]bool {
	t.Helper()
	start := strings.Index(text, "\n"+heading+"\n")
	if start < 0 {
		t.Fatalf("docs/internals.md has no %q section", heading)
	}
	level := headingLevel(heading)
	var lines []string
	for line := range strings.SplitSeq(text[start+len(heading)+2:], "\n") {
		if headingLevel(line) <= level {
			break
		}
		lines = append(lines, line)
	}
	out := map[string]bool{}
	for _, line := range lines {
		cells := strings.Split(line, "|")
		if !strings.HasPrefix(line, "| `") || len(cells) < 3 {
			continue
		}
		for _, m := range backticked.FindAllStringSubmatch(cells[1], -1) {
			out[m[1]] = true
		}
	}
	if len(out) == 0 {
		t.Fatalf("docs/internals.md: the %q section has no table rows", heading)
	}
	return out
}

func headingLevel(line string) int {
	n := 0
	for n < len(line) && line[n] == '#' {
		n++
	}
	if n == 0 || n >= len(line) || line[n] != ' ' {
		return 99
	}
	return n
}
