package delta

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/ehsink/ehsink/internal/table/mapping"
)

// TestStatsBounds: every bound still holds every value of the file
// (readers skip files by them), or is left out.
func TestStatsBounds(t *testing.T) {
	col := func(name, typ string) mapping.Column {
		c, err := mapping.NewColumn(name, "$."+name, typ)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	ts, s, d, f, b := newColStats(col("ts", "timestamp")), newColStats(col("s", "string")), newColStats(col("d", "decimal(10,2)")), newColStats(col("f", "double")), newColStats(col("b", "boolean"))
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)
	ts.add(t0)
	ts.add(t0.Add(time.Second))
	ts.add(nil)
	long := strings.Repeat("z", 40)
	s.add("b")
	s.add(long)
	s.add("a" + long)
	d.add(mapping.Decimal{Coef: -525, Scale: 2})
	d.add(mapping.Decimal{Coef: 1000, Scale: 2})
	f.add(1.5)
	f.add(math.NaN())
	b.add(true)
	var st struct {
		Min   map[string]any `json:"minValues"`
		Max   map[string]any `json:"maxValues"`
		Nulls map[string]any `json:"nullCount"`
	}
	if err := json.Unmarshal([]byte(statsJSON(3, []*colStats{ts, s, d, f, b})), &st); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		got  any
		want any
	}{
		{"ts min rounded down to ms", st.Min["ts"], "2026-01-02T03:04:05.123Z"},
		{"ts max rounded up to ms", st.Max["ts"], "2026-01-02T03:04:06.124Z"},
		{"ts nulls", st.Nulls["ts"], float64(1)},
		{"string min cut to 32 characters", st.Min["s"], "a" + strings.Repeat("z", 31)},
		{"string max over 32 characters left out", st.Max["s"], nil},
		{"decimal min", st.Min["d"], -5.25},
		{"decimal max", st.Max["d"], float64(10)},
		{"double with a NaN has no bounds", st.Min["f"], nil},
		{"boolean has no bounds", st.Max["b"], nil},
		{"boolean nulls", st.Nulls["b"], float64(0)},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
}
