package delta

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ehsink/ehsink/internal/table/mapping"
)

// colStats gathers a data file's statistics of one column, as Delta's
// add.stats carries them (numRecords, minValues, maxValues, nullCount):
// readers skip files by them, so a bound must never exclude a value the
// file holds.
type colStats struct {
	col      mapping.Column
	nulls    int64
	min, max any
	// skip: the column has no bounds: its type has none in Delta's stats
	// (boolean, binary), or a value was seen that bounds cannot describe
	// (a NaN, a decimal over 18 digits).
	skip bool
}

// maxStatString is how many characters of a string bound are kept, as
// Delta's own writers do (dataSkippingStringPrefixLength = 32).
const maxStatString = 32

func newColStats(col mapping.Column) *colStats {
	c := &colStats{col: col}
	switch col.Type.Kind {
	case mapping.KindBoolean, mapping.KindBytes:
		c.skip = true
	case mapping.KindDecimal:
		c.skip = col.Type.Precision > 18
	}
	return c
}

// add takes one mapped value of the column.
func (c *colStats) add(v any) {
	if v == nil {
		c.nulls++
		return
	}
	if c.skip {
		return
	}
	switch x := v.(type) {
	case int32:
		c.order(int64(x), func(a, b any) bool { return a.(int64) < b.(int64) })
	case int64:
		c.order(x, func(a, b any) bool { return a.(int64) < b.(int64) })
	case float64:
		if math.IsNaN(x) {
			c.skip, c.min, c.max = true, nil, nil // NaN is outside every bound
			return
		}
		c.order(x, func(a, b any) bool { return a.(float64) < b.(float64) })
	case time.Time:
		c.order(x, func(a, b any) bool { return a.(time.Time).Before(b.(time.Time)) })
	case mapping.Decimal:
		if x.Big != nil {
			c.skip, c.min, c.max = true, nil, nil
			return
		}
		c.order(x, func(a, b any) bool { return a.(mapping.Decimal).Coef < b.(mapping.Decimal).Coef })
	case string:
		c.order(x, func(a, b any) bool { return a.(string) < b.(string) })
	case json.RawMessage:
		c.add(string(x))
	case []byte:
		c.add(string(x))
	}
}

func (c *colStats) order(v any, less func(a, b any) bool) {
	if c.min == nil || less(v, c.min) {
		c.min = v
	}
	if c.max == nil || less(c.max, v) {
		c.max = v
	}
}

// bounds returns the JSON of the column's min and max, or nil when it has
// none. A timestamp's bounds are in milliseconds, as Delta writes them:
// the min rounded down, the max up, so both still hold every value.
func (c *colStats) bounds() (lo, hi any) {
	if c.skip || c.min == nil {
		return nil, nil
	}
	switch x := c.min.(type) {
	case time.Time:
		y := c.max.(time.Time)
		lo = x.UTC().Truncate(time.Millisecond).Format("2006-01-02T15:04:05.000Z")
		up := y.UTC().Truncate(time.Millisecond)
		if up.Before(y) {
			up = up.Add(time.Millisecond)
		}
		return lo, up.Format("2006-01-02T15:04:05.000Z")
	case mapping.Decimal:
		return json.Number(x.String()), json.Number(c.max.(mapping.Decimal).String())
	case string:
		// A prefix of the min is still a lower bound; a cut max is not an
		// upper bound, so a long max is left out.
		lo = truncate(x)
		if y := c.max.(string); utf8.RuneCountInString(y) <= maxStatString {
			hi = y
		}
		return lo, hi
	}
	return c.min, c.max
}

func truncate(s string) string {
	n := 0
	for i := range s {
		if n == maxStatString {
			return s[:i]
		}
		n++
	}
	return s
}

// statsJSON returns add.stats of a file of n rows.
func statsJSON(n int64, cols []*colStats) string {
	type stats struct {
		NumRecords int64          `json:"numRecords"`
		MinValues  map[string]any `json:"minValues"`
		MaxValues  map[string]any `json:"maxValues"`
		NullCount  map[string]any `json:"nullCount"`
	}
	st := stats{NumRecords: n, MinValues: map[string]any{}, MaxValues: map[string]any{}, NullCount: map[string]any{}}
	for _, c := range cols {
		st.NullCount[c.col.Name] = c.nulls
		lo, hi := c.bounds()
		if lo != nil {
			st.MinValues[c.col.Name] = lo
		}
		if hi != nil {
			st.MaxValues[c.col.Name] = hi
		}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(st) // maps of numbers and strings always encode
	return strings.TrimSpace(b.String())
}
