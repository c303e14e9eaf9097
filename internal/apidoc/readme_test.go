package apidoc

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// maxReadmeLines bounds the README: what ehsink is, the quick start, the
// three uses and links; the reference lives in docs/.
const maxReadmeLines = 300

// TestReadmeShort: the README stays at most maxReadmeLines lines.
func TestReadmeShort(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n > maxReadmeLines {
		t.Errorf("README.md has %d lines, want at most %d: move reference material to docs/", n, maxReadmeLines)
	}
}

var (
	mdLink  = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	slugDel = regexp.MustCompile(`[^a-z0-9 _-]`)
)

// TestDocLinks: every relative link of README.md and docs/*.md names a file
// or directory that exists, and every #anchor a heading of its document.
func TestDocLinks(t *testing.T) {
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../../README.md")
	anchors := map[string]map[string]bool{} // cleaned path -> heading slugs
	for _, f := range files {
		anchors[filepath.Clean(f)] = headingSlugs(t, f)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(filepath.ToSlash(f), "../../")
		for _, m := range mdLink.FindAllStringSubmatch(outsideCode(string(b)), -1) {
			link := m[1]
			if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
				continue
			}
			target, anchor, _ := strings.Cut(link, "#")
			path := filepath.Clean(f)
			if target != "" {
				path = filepath.Clean(filepath.Join(filepath.Dir(f), target))
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s links to %s, which does not exist", name, link)
					continue
				}
			}
			if anchor == "" {
				continue
			}
			slugs, ok := anchors[path]
			if !ok {
				slugs = headingSlugs(t, path)
				anchors[path] = slugs
			}
			if !slugs[anchor] {
				t.Errorf("%s links to %s, but %s has no heading #%s", name, link, strings.TrimPrefix(filepath.ToSlash(path), "../../"), anchor)
			}
		}
	}
}

// outsideCode returns text without its fenced code blocks.
func outsideCode(text string) string {
	var b strings.Builder
	fenced := false
	for line := range strings.SplitSeq(text, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// headingSlugs returns the anchors GitHub gives the headings of a Markdown
// file: lower case, punctuation dropped, spaces as hyphens.
func headingSlugs(t *testing.T, path string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	if !strings.HasSuffix(path, ".md") {
		return out
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(outsideCode(string(b)), "\n") {
		if headingLevel(line) > 6 {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		out[strings.ReplaceAll(slugDel.ReplaceAllString(strings.ToLower(title), ""), " ", "-")] = true
	}
	return out
}
