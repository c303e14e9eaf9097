package config_test

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ehsink/ehsink/internal/config"
	"github.com/ehsink/ehsink/internal/secret"
	"github.com/ehsink/ehsink/sinks"
)

type batch struct {
	MaxEvents int           `yaml:"max_events"`
	MaxWait   time.Duration `yaml:"max_wait"`
}

type common struct {
	Label string `yaml:"label"`
}

// mapping is a custom shape: either a map of name -> path or a list of
// {name, path} items.
type mapping []column

type column struct {
	Name string `yaml:"name"`
	Path string `yaml:"path"`
	Type string `yaml:"type"`
}

func (m *mapping) UnmarshalConfig(raw any) error {
	if mp, ok := raw.(map[string]any); ok {
		var paths map[string]string
		if err := config.Decode(mp, &paths); err != nil {
			return err
		}
		for _, k := range slices.Sorted(func(yield func(string) bool) {
			for k := range paths {
				if !yield(k) {
					return
				}
			}
		}) {
			*m = append(*m, column{Name: k, Path: paths[k]})
		}
		return nil
	}
	var cols []column
	err := config.Decode(raw, &cols)
	for i, c := range cols {
		if c.Name == "" {
			err = errors.Join(err, &config.Error{Path: fmt.Sprintf("[%d].name", i), Err: errors.New("required")})
		}
	}
	*m = cols
	return err
}

type sample struct {
	common   `yaml:",inline"`
	Name     string            `yaml:"name"`
	Secret   secret.String     `yaml:"secret"`
	Enabled  bool              `yaml:"enabled"`
	Count    int               `yaml:"count"`
	Small    int8              `yaml:"small"`
	Unsigned uint              `yaml:"unsigned"`
	Rate     float64           `yaml:"rate"`
	Wait     time.Duration     `yaml:"wait"`
	Size     config.ByteSize   `yaml:"size"`
	Labels   map[string]string `yaml:"labels"`
	Parts    map[int]int       `yaml:"parts"`
	Keys     []string          `yaml:"keys"`
	Batch    batch             `yaml:"batch"`
	Opt      *batch            `yaml:"opt"`
	Columns  mapping           `yaml:"columns"`
	Extra    any               `yaml:"extra"`
	Skipped  string            `yaml:"-"`
	Untagged string
	At       time.Time `yaml:"at"`
	PtrInt   *int      `yaml:"ptr_int"`
}

func TestDecodeKinds(t *testing.T) {
	raw := map[string]any{
		"label":    "L",
		"name":     "orders",
		"secret":   "Endpoint=sb://x/;SharedAccessKey=abc",
		"enabled":  true,
		"count":    500,
		"small":    "12",
		"unsigned": 7,
		"rate":     2,
		"wait":     "1m30s",
		"size":     "64MiB",
		"labels":   map[string]any{"a": "x", "b": 3},
		"parts":    map[string]any{"0": 4, "1": 5},
		"keys":     []any{"order_id", "customer"},
		"batch":    map[string]any{"max_events": "100", "max_wait": "500ms"},
		"opt":      nil,
		"columns":  map[string]any{"amount": "$.amount", "id": "$.order_id"},
		"extra":    map[string]any{"free": []any{1, "two"}},
		"untagged": "u",
		"at":       "2026-01-02T03:04:05Z",
		"ptr_int":  9,
	}
	var got sample
	got.Batch.MaxEvents = 1 // overwritten
	if err := config.Decode(raw, &got); err != nil {
		t.Fatalf("Decode: %v", err)
	}
	nine := 9
	want := sample{
		common:   common{Label: "L"},
		Name:     "orders",
		Secret:   "Endpoint=sb://x/;SharedAccessKey=abc",
		Enabled:  true,
		Count:    500,
		Small:    12,
		Unsigned: 7,
		Rate:     2,
		Wait:     90 * time.Second,
		Size:     64 << 20,
		Labels:   map[string]string{"a": "x", "b": "3"},
		Parts:    map[int]int{0: 4, 1: 5},
		Keys:     []string{"order_id", "customer"},
		Batch:    batch{MaxEvents: 100, MaxWait: 500 * time.Millisecond},
		Opt:      &batch{},
		Columns:  mapping{{Name: "amount", Path: "$.amount"}, {Name: "id", Path: "$.order_id"}},
		Extra:    map[string]any{"free": []any{1, "two"}},
		Untagged: "u",
		At:       time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		PtrInt:   &nine,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Decode:\n got %#v\nwant %#v", got, want)
	}
}

func TestDecodeKeepsDefaults(t *testing.T) {
	got := batch{MaxEvents: 500, MaxWait: time.Second}
	if err := config.Decode(map[string]any{"max_wait": "2s"}, &got); err != nil {
		t.Fatal(err)
	}
	if want := (batch{MaxEvents: 500, MaxWait: 2 * time.Second}); got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	// A key with no value keeps the default too.
	if err := config.Decode(map[string]any{"max_events": nil}, &got); err != nil || got.MaxEvents != 500 {
		t.Errorf("null value: got %+v, %v", got, err)
	}
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name string
		raw  any
		// want maps each expected path to a substring of its message.
		want map[string]string
	}{
		{"unknown key with suggestion", map[string]any{"batch": map[string]any{"max_evnts": 1}},
			map[string]string{"batch.max_evnts": "unknown key (did you mean max_events?)"}},
		{"transposition", map[string]any{"naem": "x"},
			map[string]string{"naem": "did you mean name?"}},
		{"unknown key without suggestion lists keys", map[string]any{"batch": map[string]any{"zzzzzz": 1}},
			map[string]string{"batch.zzzzzz": "known keys: max_events, max_wait"}},
		{"bare number duration", map[string]any{"wait": 500},
			map[string]string{"wait": "500 has no unit"}},
		{"bare number duration string", map[string]any{"batch": map[string]any{"max_wait": "500"}},
			map[string]string{"batch.max_wait": `"500" has no unit`}},
		{"bad duration", map[string]any{"wait": "5 minutes"},
			map[string]string{"wait": `"5 minutes" is not a duration`}},
		{"bad int", map[string]any{"count": "many"},
			map[string]string{"count": `expected an integer, got the string "many"`}},
		{"fraction into int", map[string]any{"count": 1.5},
			map[string]string{"count": "expected an integer, got the number 1.5"}},
		{"overflow", map[string]any{"small": 300},
			map[string]string{"small": "300 is out of range"}},
		{"negative uint", map[string]any{"unsigned": -1},
			map[string]string{"unsigned": "must not be negative"}},
		{"bad bool", map[string]any{"enabled": "maybe"},
			map[string]string{"enabled": "expected true or false"}},
		{"map for string", map[string]any{"name": map[string]any{}},
			map[string]string{"name": "expected a string, got a map"}},
		{"list for struct", map[string]any{"batch": []any{1}},
			map[string]string{"batch": "expected a map of keys, got a list"}},
		{"string for list", map[string]any{"keys": "a,b"},
			map[string]string{"keys": `expected a list, got the string "a,b"`}},
		{"bad size", map[string]any{"size": "64M"},
			map[string]string{"size": "unknown size unit"}},
		{"bad map key", map[string]any{"parts": map[string]any{"x": 1}},
			map[string]string{`parts.x`: `key "x" is not an integer`}},
		{"nested list paths", map[string]any{"columns": []any{
			map[string]any{"name": "a", "typo": 1},
			map[string]any{"path": "$.b"},
		}}, map[string]string{"columns[0].typo": "did you mean type?", "columns[1].name": "required"}},
		{"list item", map[string]any{"keys": []any{"a", map[string]any{}}},
			map[string]string{"keys[1]": "expected a string"}},
		{"not a map at all", "hello", map[string]string{"": "expected a map of keys"}},
		{"quoted key path", map[string]any{"labels": map[string]any{"a.b": []any{}}},
			map[string]string{`labels["a.b"]`: "expected a string"}},
		{"all problems at once", map[string]any{
			"nmae":  "x",
			"count": "x",
			"wait":  5,
			"batch": map[string]any{"max_evnts": 1, "max_wait": "forever"},
		}, map[string]string{
			"nmae":            "did you mean name?",
			"count":           "expected an integer",
			"wait":            "has no unit",
			"batch.max_evnts": "did you mean max_events?",
			"batch.max_wait":  "is not a duration",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s sample
			err := config.Decode(tt.raw, &s)
			assertProblems(t, err, tt.want)
		})
	}
}

// assertProblems checks that err holds exactly one *config.Error per path in
// want, each containing its message substring.
func assertProblems(t *testing.T, err error, want map[string]string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %v", want)
	}
	got := map[string]string{}
	for _, e := range config.Errors(err) {
		if _, dup := got[e.Path]; dup {
			t.Errorf("two problems at %q: %v", e.Path, err)
		}
		got[e.Path] = e.Err.Error()
	}
	for path, msg := range want {
		g, ok := got[path]
		if !ok {
			t.Errorf("no problem at %q; got:\n%v", path, err)
			continue
		}
		if !strings.Contains(g, msg) {
			t.Errorf("%s: %q does not contain %q", path, g, msg)
		}
	}
	for path := range got {
		if _, ok := want[path]; !ok {
			t.Errorf("unexpected problem at %q: %s", path, got[path])
		}
	}
	// The joined message names every path too.
	for path := range want {
		if path != "" && !strings.Contains(err.Error(), path+": ") {
			t.Errorf("message %q does not name %q", err.Error(), path)
		}
	}
}

func TestDecodeErrorNeverShowsSecretLikeValues(t *testing.T) {
	conn := "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=SUPERSECRET"
	dsn := "postgres://user:hunter2@db:5432/app"
	var s sample
	err := config.Decode(map[string]any{"count": conn, "wait": dsn, "size": conn, "enabled": dsn}, &s)
	if err == nil {
		t.Fatal("no error")
	}
	for _, leak := range []string{"SUPERSECRET", "hunter2", conn, dsn} {
		if strings.Contains(err.Error(), leak) {
			t.Errorf("error shows %q: %v", leak, err)
		}
	}
	if n := len(config.Errors(err)); n != 4 {
		t.Errorf("%d problems, want 4: %v", n, err)
	}
}

func TestDecodeNeedsPointer(t *testing.T) {
	var s sample
	if err := config.Decode(map[string]any{}, s); err == nil {
		t.Error("Decode into a non-pointer: no error")
	}
}

func TestDecodeIntoInterfaceHoldingPointer(t *testing.T) {
	var cfg any = &batch{MaxEvents: 5}
	if err := config.Decode(map[string]any{"max_wait": "1s"}, &cfg); err != nil {
		t.Fatal(err)
	}
	if got := *cfg.(*batch); got != (batch{MaxEvents: 5, MaxWait: time.Second}) {
		t.Errorf("got %+v", got)
	}
}

func TestPrefixAndErrors(t *testing.T) {
	inner := errors.Join(
		&config.Error{Path: "table", Err: errors.New("required")},
		&config.Error{Path: "[2].type", Err: errors.New("bad")},
		errors.New("plain"),
		&config.Error{Path: "columns", Err: errors.Join(&config.Error{Path: "[0]", Err: errors.New("x")})},
		&sinks.FieldError{Field: "amount.type", Err: errors.New("bad type")},
		&config.Error{Path: "mapping", Err: &sinks.FieldError{Field: "[1].from", Err: errors.New("y")}},
	)
	got := config.Errors(config.Prefix("connectors[1].sink", inner))
	var paths []string
	for _, e := range got {
		paths = append(paths, e.Path)
	}
	want := []string{"connectors[1].sink.table", "connectors[1].sink[2].type", "connectors[1].sink", "connectors[1].sink.columns[0]",
		"connectors[1].sink.amount.type", "connectors[1].sink.mapping[1].from"}
	if !slices.Equal(paths, want) {
		t.Errorf("paths %q, want %q", paths, want)
	}
	if config.Prefix("x", nil) != nil {
		t.Error("Prefix(nil) is not nil")
	}
}

func TestByteSize(t *testing.T) {
	tests := []struct {
		in   string
		want config.ByteSize
		err  bool
	}{
		{"1024", 1024, false},
		{"64MiB", 64 << 20, false},
		{"64mib", 64 << 20, false},
		{"10MB", 10_000_000, false},
		{"1.5GiB", 3 << 29, false},
		{"512 KiB", 512 << 10, false},
		{"1B", 1, false},
		{"2TB", 2e12, false},
		{"64M", 0, true},
		{"MiB", 0, true},
		{"-1", 0, true},
		{"", 0, true},
		{"1..2MB", 0, true},
		{"99999999999TiB", 0, true},
	}
	for _, tt := range tests {
		got, err := config.ParseByteSize(tt.in)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("ParseByteSize(%q) = %d, %v; want %d, error %v", tt.in, got, err, tt.want, tt.err)
		}
	}
	for _, tt := range []struct {
		in   config.ByteSize
		want string
	}{{64 << 20, "64MiB"}, {1536 << 10, "1536KiB"}, {1000, "1000"}, {0, "0"}, {3 << 40, "3TiB"}} {
		if got := tt.in.String(); got != tt.want {
			t.Errorf("%d.String() = %q, want %q", int64(tt.in), got, tt.want)
		}
	}
}

// fieldErrShape reports its problems as *sinks.FieldError, as sink configs do.
type fieldErrShape struct{}

func (*fieldErrShape) UnmarshalConfig(raw any) error {
	return errors.Join(&sinks.FieldError{Field: "[0].from", Err: errors.New("bad source")},
		&sinks.FieldError{Field: "amount.type", Err: errors.New("bad type")})
}

func TestDecodeUnmarshalerFieldErrors(t *testing.T) {
	var v struct {
		Cols fieldErrShape `yaml:"columns"`
	}
	err := config.Decode(map[string]any{"columns": []any{}}, &v)
	assertProblems(t, err, map[string]string{"columns[0].from": "bad source", "columns.amount.type": "bad type"})
}
