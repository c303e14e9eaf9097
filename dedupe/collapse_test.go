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
