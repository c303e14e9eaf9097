package deploy_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestGrafanaDashboard checks deploy/grafana/ehsink-dashboard.json: it is
// a dashboard with panels, and every ehsink metric its queries use is one
// the metrics table of docs/operations.md describes (and so one ehsink serves: a test
// of the ops package keeps that table in step with the server).
func TestGrafanaDashboard(t *testing.T) {
	b, err := os.ReadFile("grafana/ehsink-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string `json:"title"`
		UID    string `json:"uid"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	if dash.Title == "" || dash.UID == "" || len(dash.Panels) == 0 {
		t.Fatalf("dashboard without a title, uid or panels")
	}
	readme, err := os.ReadFile(filepath.Join(root, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(ehsink_[a-z_]+)` \\|").FindAllStringSubmatch(string(readme), -1) {
		documented[m[1]] = true
	}
	if len(documented) == 0 {
		t.Fatal("docs/operations.md has no metrics table")
	}
	metric := regexp.MustCompile(`ehsink_[a-z_]+`)
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			for _, name := range metric.FindAllString(tg.Expr, -1) {
				base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
				if !documented[base] {
					t.Errorf("panel %q queries %s, which the metrics table of docs/operations.md does not describe", p.Title, name)
				}
			}
		}
	}
}
