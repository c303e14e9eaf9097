package conntest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/ehsink/ehsink/internal/table/mapping"
)

// An expected value from a test file equals a mapped value exactly when
// both mean the same value of the column's type.
func TestValueComparison(t *testing.T) {
	col := func(typ string) mapping.Column {
		ty, err := mapping.ParseType(typ)
		if err != nil {
			t.Fatal(err)
		}
		return mapping.Column{Name: "c", Type: ty}
	}
	at := time.Date(2026, 3, 1, 10, 0, 0, 250_000_000, time.UTC)
	for _, tc := range []struct {
		typ   string
		got   any
		want  any
		equal bool
	}{
		{"string", "o-1", "o-1", true},
		{"string", "7", 7, true},
		{"string", "o-1", "o-2", false},
		{"int64", int64(41), 41, true},
		{"int64", int64(41), "41", true},
		{"int32", int32(41), 42, false},
		{"double", 42.5, 42.5, true},
		{"double", 7.0, 7, true},
		{"double", 42.5, 42.05, false},
		{"numeric(12,2)", mapping.Decimal{Coef: 1250, Scale: 2}, "12.5", true},
		{"numeric(12,2)", mapping.Decimal{Coef: 1250, Scale: 2}, 12.5, true},
		{"numeric(12,2)", mapping.Decimal{Coef: 1250, Scale: 2}, "12.49", false},
		{"boolean", true, true, true},
		{"boolean", true, "false", false},
		{"timestamp", at, "2026-03-01T11:00:00.25+01:00", true},
		{"timestamp", at, at, true},
		{"timestamp", at, "2026-03-01T10:00:00Z", false},
		{"json", json.RawMessage(`{"b":[1,2.0],"a":null}`), map[string]any{"a": nil, "b": []any{1, 2}}, true},
		{"json", json.RawMessage(`{"a":1}`), `{ "a" : 1.0 }`, true},
		{"json", json.RawMessage(`"x"`), `"y"`, false},
		{"uuid", [16]byte{0x8f, 0x14, 0xe4, 0x5f, 0xce, 0xea, 0x46, 0x7a, 0x95, 0x75, 0x2a, 0x4a, 0x1b, 0x2c, 0x3d, 0x4e}, "8F14E45F-CEEA-467A-9575-2A4A1B2C3D4E", true},
		{"bytes", []byte("hi"), "hi", true},
		{"string", nil, nil, true},
		{"string", "", nil, false},
	} {
		c := col(tc.typ)
		want, err := wantValue(c, tc.want)
		if err != nil {
			t.Errorf("%s: wantValue(%v): %v", tc.typ, tc.want, err)
			continue
		}
		if got := gotValue(c, tc.got); (got.key == want.key) != tc.equal {
			t.Errorf("%s: got %v (%s), want %v (%s): equal is %v, want %v", tc.typ, tc.got, got.show, tc.want, want.show, !tc.equal, tc.equal)
		}
	}
	for _, bad := range []struct {
		typ  string
		want any
	}{{"int64", 1.5}, {"int64", "many"}, {"double", "x"}, {"boolean", "yes please"}, {"timestamp", "yesterday"}, {"json", "{"}, {"string", []any{1}}} {
		if _, err := wantValue(col(bad.typ), bad.want); err == nil {
			t.Errorf("%s: wantValue(%v) accepted a value the column cannot hold", bad.typ, bad.want)
		}
	}
}
