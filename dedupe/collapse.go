package dedupe

// Collapse keeps, for every key, only the item with the highest sequence
// number (the last one on ties), and returns the survivors in their
// original relative order, which for a partition batch is sequence-number
// order. It works in place: the result shares items' backing array, and the
// items not kept are moved behind it, so every element of items is still
// there exactly once. Callers that reuse buffers held inside their items
// (a row's value slice) therefore never find two items sharing one.
//
// Upsert sinks need it because PostgreSQL refuses to touch one row twice in
// a single INSERT ... ON CONFLICT DO UPDATE ("command cannot affect row a
// second time"), and because only the newest value of a key matters.
//
// key and seq are called once per item. A batch without repeated keys is
// returned unchanged (same length, same order); Collapse allocates one map
// of len(items) entries per call.
func Collapse[T any, K comparable](items []T, key func(*T) K, seq func(*T) int64) []T {
	if len(items) < 2 {
		return items
	}
	best := make(map[K]int, len(items)) // key -> index of its newest item
	for i := range items {
		k := key(&items[i])
		if j, ok := best[k]; !ok || seq(&items[i]) >= seq(&items[j]) {
			best[k] = i
		}
	}
	if len(best) == len(items) {
		return items
	}
	out := 0
	for i := range items {
		if best[key(&items[i])] == i {
			// A swap, not a copy: a copy would leave two items holding
			// the same buffers and lose the dropped item's.
			items[out], items[i] = items[i], items[out]
			out++
		}
	}
	return items[:out]
}
