package connector

import (
	"strings"
	"testing"
)

// TestRevision: the configuration revision is the same for two loads of a
// file, for the spec as run fills in its defaults, and whatever the
// source's connection (which `ehsink deadletters` loads without its
// secret); a changed mapping gives another.
func TestRevision(t *testing.T) {
	const text = `
connectors:
  - name: orders
    source: {connection: "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=KEY1;EntityPath=orders"}
    sink: {type: postgres, dsn: "postgres://app:PW@db/app", table: orders, columns: {id: $.id, amount: {from: $.amount, type: "numeric(5,2)"}}}
`
	revOf := func(text string) string {
		t.Helper()
		cfg, err := loadYAML(t, text, LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rev := cfg.Connectors[0].Revision()
		if run := cfg.withDefaults().Connectors[0].Revision(); run != rev {
			t.Fatalf("revision %s as loaded, %s as run fills it in", rev, run)
		}
		return rev
	}
	rev := revOf(text)
	if len(rev) != 12 {
		t.Fatalf("revision %q, want 12 hex digits", rev)
	}
	if again := revOf(text); again != rev {
		t.Errorf("two loads: %s and %s", rev, again)
	}
	if other := revOf(strings.Replace(text, "KEY1", "KEY2", 1)); other != rev {
		t.Errorf("a rotated key changed the revision: %s, then %s", rev, other)
	}
	if fixed := revOf(strings.Replace(text, "numeric(5,2)", "numeric(7,2)", 1)); fixed == rev {
		t.Errorf("a changed mapping kept revision %s", rev)
	}
}
