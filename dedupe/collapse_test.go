package dedupe

import (
	"fmt"
	"reflect"
	"testing"
)

type item struct {
	key string
	seq int64
}

func TestCollapse(t *testing.T) {
	tests := []struct {
		name string
		in   []item
		want []item
	}{
		{"empty", nil, nil},
		{"one", []item{{"a", 1}}, []item{{"a", 1}}},
		{"unique keys unchanged", []item{{"a", 1}, {"b", 2}, {"c", 3}}, []item{{"a", 1}, {"b", 2}, {"c", 3}}},
		{"last by seq wins, survivors in seq order", []item{{"a", 1}, {"b", 2}, {"a", 3}, {"c", 4}, {"b", 5}}, []item{{"a", 3}, {"c", 4}, {"b", 5}}},
		{"out of order input keeps highest seq", []item{{"a", 9}, {"a", 3}, {"b", 1}}, []item{{"a", 9}, {"b", 1}}},
		{"all one key", []item{{"k", 1}, {"k", 2}, {"k", 3}}, []item{{"k", 3}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Collapse(append([]item(nil), tt.in...), func(it *item) string { return it.key }, func(it *item) int64 { return it.seq })
			if len(got) == 0 && len(tt.want) == 0 {
				return
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Collapse(%v) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

// TestCollapseKeepsEveryElement: the items not kept stay in the slice, so
// buffers held inside items are never shared by two of them after a collapse
// (a pooled row reused by the next batch must not alias a surviving row).
func TestCollapseKeepsEveryElement(t *testing.T) {
	type row struct {
		key  string
		seq  int64
		vals *[]int // stands for a row's reused value buffer
	}
	keys := []string{"a", "b", "a", "c", "a", "b", "d"}
	rows := make([]row, len(keys))
	for i, k := range keys {
		buf := []int{i}
		rows[i] = row{key: k, seq: int64(i), vals: &buf}
	}
	got := Collapse(rows, func(r *row) string { return r.key }, func(r *row) int64 { return r.seq })
	var gotSeqs []int64
	for _, r := range got {
		gotSeqs = append(gotSeqs, r.seq)
	}
	if !reflect.DeepEqual(gotSeqs, []int64{3, 4, 5, 6}) {
		t.Fatalf("survivors %v, want [3 4 5 6]", gotSeqs)
	}
	seen := map[*[]int]bool{}
	for _, r := range rows { // the whole backing array, kept and dropped
		if seen[r.vals] {
			t.Fatalf("two items share one buffer after Collapse: %v", rows)
		}
		seen[r.vals] = true
	}
	if len(seen) != len(keys) {
		t.Fatalf("%d distinct buffers left of %d", len(seen), len(keys))
	}
}

func BenchmarkCollapse(b *testing.B) {
	items := make([]item, 500)
	for i := range items {
		items[i] = item{fmt.Sprint(i % 400), int64(i)}
	}
	buf := make([]item, len(items))
	b.ReportAllocs()
	for b.Loop() {
		copy(buf, items)
		_ = Collapse(buf, func(it *item) string { return it.key }, func(it *item) int64 { return it.seq })
	}
}
