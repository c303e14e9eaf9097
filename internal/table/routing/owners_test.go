package routing

import (
	"strings"
	"testing"
)

// TestOwners: a literal table belongs to its route from the start, a
// templated route's tables to it as they are added, up to its bound, and
// a table of one route is an error of the event that names it on another.
func TestOwners(t *testing.T) {
	o := NewOwners([]string{"lit", "tmpl"}, []int{100, 2}, []string{"orders", ""})
	for _, tc := range []struct {
		route int
		table string
		want  string // "" for allowed
	}{
		{0, "orders", ""},
		{1, "orders", "is written by route lit"},
		{1, "t_a", ""},
		{1, "t_b", ""},
		{1, "t_a", ""}, // already its own
		{1, "t_c", "past max_tables 2"},
		{0, "t_a", "is written by route tmpl"},
	} {
		err := o.Check(tc.route, tc.table)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Fatalf("Check(%d, %s) = %v, want %q", tc.route, tc.table, err, tc.want)
		}
		if err == nil {
			o.Add(tc.route, tc.table)
		}
	}
}
