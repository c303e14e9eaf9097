package parquet

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ehsink/ehsink/internal/config"
	"github.com/ehsink/ehsink/sinks"
)

func TestTemplateRenderAndMatch(t *testing.T) {
	tm, err := parseTemplate(defaultPath)
	if err != nil {
		t.Fatal(err)
	}
	v := nameVars{eventHub: "orders", partition: "3", enqueued: time.Date(2026, 2, 1, 23, 59, 0, 0, time.FixedZone("x", 3600)), firstSeq: 7, lastSeq: 1234}
	got := tm.render(v)
	want := "orders/partition=3/date=2026-02-01/3-00000000000000000007-00000000000000001234.parquet"
	if got != want {
		t.Fatalf("render = %q, want %q (UTC date)", got, want)
	}
	m := tm.matcher(v)
	if m.prefix != "orders/partition=3/" {
		t.Fatalf("prefix = %q", m.prefix)
	}
	cases := []struct {
		name        string
		first, last int64
		ok          bool
	}{
		{want, 7, 1234, true},
		{"orders/partition=3/date=2026-02-02/3-00000000000000001235-00000000000000001300.parquet", 1235, 1300, true},
		{"orders/partition=30/date=2026-02-01/30-00000000000000000007-00000000000000001234.parquet", 0, 0, false},
		{"orders/partition=3/date=2026-02-01/_dead_letters/3-00000000000000000007-00000000000000001234.jsonl", 0, 0, false},
		{"orders/partition=3/date=2026-02-01/.ehsink-x-p3-1.tmp", 0, 0, false},
		{"orders/partition=3/date=2026-02-01/3-00000000000000000009-00000000000000000008.parquet", 0, 0, false},
		{"other/partition=3/date=2026-02-01/3-00000000000000000007-00000000000000001234.parquet", 0, 0, false},
	}
	for _, c := range cases {
		first, last, ok := m.match(c.name)
		if ok != c.ok || first != c.first || last != c.last {
			t.Errorf("match(%q) = %d, %d, %v; want %d, %d, %v", c.name, first, last, ok, c.first, c.last, c.ok)
		}
	}
	dl := tm.deadLetterTemplate().render(v)
	if dl != "orders/partition=3/date=2026-02-01/_dead_letters/3-00000000000000000007-00000000000000001234.jsonl" {
		t.Fatalf("dead-letter name %q", dl)
	}
	if _, _, ok := tm.deadLetterTemplate().matcher(v).match(dl); !ok {
		t.Fatalf("dead-letter matcher does not match %q", dl)
	}
}

func TestTemplateErrors(t *testing.T) {
	cases := []struct{ tmpl, want string }{
		{"{partition}-{first_seq}.parquet", "{last_seq} is required"},
		{"{first_seq}-{last_seq}.parquet", "{partition} is required"},
		{"{partition}/{last_seq}/{first_seq}.parquet", "only in the file name"},
		{"{partition}-{first_seq}-{last_seq", "unclosed"},
		{"{partition}-{first_seq:20}-{last_seq}", "format must be 0N"},
		{"{partition}-{nope}-{first_seq}-{last_seq}", "unknown placeholder {nope}"},
		{"/abs/{partition}-{first_seq}-{last_seq}", "relative"},
		{"../{partition}-{first_seq}-{last_seq}", ". and .."},
		{"_x/{partition}-{first_seq}-{last_seq}", "may not start with _"},
		{"{partition:02}-{first_seq}-{last_seq}", "takes no format"},
	}
	for _, c := range cases {
		_, err := parseTemplate(c.tmpl)
		if err == nil || !errors.Is(err, errTemplate) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("parseTemplate(%q) = %v, want an error containing %q", c.tmpl, err, c.want)
		}
	}
	for _, ok := range []string{defaultPath, "{connector}/{year}/{month}/{day}/{hour}/p{partition}_{first_seq:08}_{last_seq:08}.parquet"} {
		if _, err := parseTemplate(ok); err != nil {
			t.Errorf("parseTemplate(%q): %v", ok, err)
		}
	}
}

func TestConfigDecodeAndValidate(t *testing.T) {
	cases := []struct {
		name   string
		raw    map[string]any
		fields []string // the FieldError paths expected, sorted; nil: valid
	}{
		{"minimal dir", map[string]any{"dir": "/tmp/x", "columns": map[string]any{"id": "$.id"}}, nil},
		{"blob with everything", map[string]any{
			"blob":    map[string]any{"connection": "AccountName=devstoreaccount1;AccountKey=STORAGEKEY00;BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1", "container": "c"},
			"columns": []any{map[string]any{"name": "amount", "from": "$.amount", "type": "decimal(12,2)"}},
			"path":    "{partition}/{first_seq}-{last_seq}.parquet", "compression": "snappy",
			"row_group_size": "8MiB", "max_rows": 10, "max_bytes": "1GiB", "max_age": "30s",
		}, nil},
		{"no destination", map[string]any{"columns": map[string]any{"id": "$.id"}}, []string{"dir"}},
		{"both destinations", map[string]any{"dir": "x", "blob": map[string]any{"connection": "AccountName=a;AccountKey=STORAGEKEY00", "container": "c"}, "columns": map[string]any{"id": "$.id"}}, []string{"blob"}},
		{"blob without fields", map[string]any{"blob": map[string]any{}, "columns": map[string]any{"id": "$.id"}}, []string{"blob.connection", "blob.container"}},
		{"every problem at once", map[string]any{
			"dir": "x", "path": "{first_seq}.parquet", "compression": "lz4", "max_rows": -1,
			"columns": map[string]any{"amount": map[string]any{"from": "$.amount", "type": "decimal"}},
		}, []string{"columns.amount.type", "compression", "max_rows", "path"}},
		{"no columns", map[string]any{"dir": "x"}, []string{"columns"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := driver{}.NewConfig().(*sinkConfig)
			if err := config.Decode(tc.raw, c); err != nil {
				t.Fatalf("Decode: %v", err)
			}
			err := c.Validate()
			var got []string
			for _, e := range flatten(err) {
				var fe *sinks.FieldError
				if !errors.As(e, &fe) {
					t.Fatalf("not a *sinks.FieldError: %v", e)
				}
				got = append(got, fe.Field)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.fields) {
				t.Fatalf("Validate problems at %v, want %v (%v)", got, tc.fields, err)
			}
		})
	}
}

func TestConfigNeverPrintsConnection(t *testing.T) {
	c := newConfig()
	c.Blob = &blobConfig{Connection: "AccountKey=topsecret", Container: "c"}
	out, err := config.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "topsecret") || strings.Contains(c.String(), "topsecret") {
		t.Fatalf("secret printed: %s / %s", out, c)
	}
}

func flatten(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}
