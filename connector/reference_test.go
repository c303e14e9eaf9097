package connector

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestConfigReferenceComplete: every key of the configuration (the yaml
// tags of Config, walked from the type) has a row of the README's
// configuration reference, so the reference cannot lose a key the spec
// gains. A key is documented by a row naming its path (`source.start`), or
// by the row of its parent that names it (`source.load_balancing` lists
// strategy, update_interval and ownership_expiration). The sink's own keys
// are documented per sink, below the table.
func TestConfigReferenceComplete(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, l := range strings.Split(string(readme), "\n") {
		if strings.HasPrefix(l, "| `") {
			rows = append(rows, l)
		}
	}
	firstCell := func(row string) string {
		cells := strings.Split(row, "|")
		return cells[1]
	}
	documented := func(path string) bool {
		parent, leaf := "", path
		if i := strings.LastIndex(path, "."); i >= 0 {
			parent, leaf = path[:i], path[i+1:]
		}
		for _, r := range rows {
			first := firstCell(r)
			switch {
			case strings.Contains(first, "`"+path+"`"), strings.Contains(first, "`connectors[]."+path+"`"),
				strings.Contains(first, "`"+path+"."): // its own row, or rows of its keys
				return true
			case parent == "":
			case strings.Contains(first, "`"+parent+"`") && strings.Contains(r, leaf):
				return true // its parent's row lists it
			case strings.Contains(first, "`"+parent+".") && strings.Contains(r, "`"+leaf):
				return true // a sibling's row names it (`source.connection`: ... `namespace`)
			}
		}
		return false
	}
	var missing []string
	var walk func(prefix string, t reflect.Type)
	walk = func(prefix string, typ reflect.Type) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct || typ == reflect.TypeFor[time.Time]() {
			return
		}
		for i := range typ.NumField() {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if !f.IsExported() || name == "" || name == "-" {
				continue
			}
			path := name
			if prefix != "" {
				path = prefix + "." + name
			}
			if path == "connectors" { // its rows are those of each connector's keys
				walk("", f.Type)
				continue
			}
			if !documented(path) {
				missing = append(missing, path)
			}
			if path != "sink" {
				walk(path, f.Type)
			}
		}
	}
	walk("", reflect.TypeFor[Config]())
	if len(missing) > 0 {
		t.Errorf("the README's configuration reference lacks %d key(s): %s", len(missing), strings.Join(missing, ", "))
	}
}
