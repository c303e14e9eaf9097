package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ehsink/ehsink/internal/secret"
	"github.com/ehsink/ehsink/internal/table/mapping"
	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/sinks/sinktest"
)

// explodeEvents are events of s%4 records each (some none). Element 0 of
// every event s%100 == 25 does not convert; event s%100 == 30 holds no
// array. Element k of event s is {"id": "s-k", "v": k}.
func explodeEvents(last int64) []sinks.Event {
	events := sinktest.Events("0", 0, last)
	for i := range events {
		s := events[i].SequenceNumber
		var recs []string
		for k := range s % 4 {
			v := fmt.Sprint(k)
			if s%100 == 25 && k == 0 {
				v = `"bad"`
			}
			recs = append(recs, fmt.Sprintf(`{"id":"%d-%d","v":%s}`, s, k, v))
		}
		events[i].Body = []byte(`{"records":[` + strings.Join(recs, ",") + `]}`)
		if s%100 == 30 {
			events[i].Body = []byte(`{"records":{}}`)
		}
	}
	return events
}

// explodedWant is what a clean run of explodeEvents(last) writes:
// seq*10+index of each element that converts, in order.
func explodedWant(last int64) []int64 {
	var want []int64
	for s := int64(0); s <= last; s++ {
		for k := range s % 4 {
			if s%100 == 30 || s%100 == 25 && k == 0 {
				continue
			}
			want = append(want, s*10+k)
		}
	}
	return want
}

func explodeConfig(t testing.TB, dsn string) *sinkConfig {
	t.Helper()
	var cols mapping.Columns
	if err := cols.UnmarshalConfig([]any{
		map[string]any{"name": "seq", "from": "@sequence_number"},
		map[string]any{"name": "idx", "from": "@index"},
		map[string]any{"name": "id", "from": "$.id"},
		map[string]any{"name": "v", "from": "$.v", "type": "integer"},
	}); err != nil {
		t.Fatal(err)
	}
	p, err := mapping.ParsePath("$.records")
	if err != nil {
		t.Fatal(err)
	}
	return &sinkConfig{DSN: secret.String(dsn), Table: "elems", Mode: modeAppend, Columns: cols, Explode: p, PoolSize: 2}
}

const explodeTable = `CREATE TABLE elems (rid bigserial, seq bigint NOT NULL, idx bigint NOT NULL, id text, v integer,
	CHECK (id = seq || '-' || idx))`

// TestExplodeCrashAtEachStep crashes the third flush of an exploding
// append connector at each step of the commit protocol, restarts from the
// last checkpoint, and checks the table holds exactly the elements a clean
// run writes, each once, and the dead letters once each: all rows of an
// event commit with it, under its (partition, sequence number) watermark.
func TestExplodeCrashAtEachStep(t *testing.T) {
	const last = 299
	events := explodeEvents(last)
	for _, point := range []string{"none", faultBeforeCopy, faultBeforeCommit, "after-commit", "checkpoint"} {
		t.Run(point, func(t *testing.T) {
			dsn := newDB(t)
			execSQL(t, dsn, explodeTable)
			cfg := explodeConfig(t, dsn)
			cp := &checkpointStore{seq: map[string]int64{}}
			if point != "none" {
				s1 := newTestSink(t, cfg)
				calls := 0
				s1.faults = func(p string) error {
					if p == point {
						if calls++; calls == 3 {
							return errCrash
						}
					}
					return nil
				}
				crashed := false
				done := runPartition(t, s1, cp, "0", events, 50, func(p string, flushes int) bool {
					if p == point && flushes == 3 {
						crashed = true
						return true
					}
					return false
				})
				if done || (calls < 3 && !crashed) {
					t.Fatalf("the crash at %s was not injected", point)
				}
				s1.Close(context.Background())
			}
			s2 := newTestSink(t, cfg)
			if !runPartition(t, s2, cp, "0", events, 50, nil) {
				t.Fatal("restart did not complete")
			}
			if got, _ := cp.get("0"); got != last {
				t.Fatalf("checkpoint = %d, want %d", got, last)
			}
			got := queryInts(t, dsn, `SELECT seq*10+idx FROM elems ORDER BY rid`)
			if want := explodedWant(last); !slices.Equal(got, want) {
				t.Fatalf("table holds %d elements %s, want %d, each once in order", len(got), head(got), len(want))
			}
			dead := queryInts(t, dsn, `SELECT sequence_number FROM ehsink_dead_letters ORDER BY sequence_number`)
			if want := []int64{25, 30, 125, 130, 225, 230}; !slices.Equal(dead, want) {
				t.Fatalf("dead letters %v, want %v once each", dead, want)
			}
			reasons := queryInts(t, dsn, `SELECT count(*) FROM ehsink_dead_letters WHERE reason LIKE 'element 0: column "v": %'`)
			if reasons[0] != 3 {
				t.Fatalf("%d dead letters name the element, want 3", reasons[0])
			}
		})
	}
}

// TestExplodeRefusedElement: an element PostgreSQL refuses at commit (a
// CHECK) dead-letters its event once, with all its rows; the other
// events' rows are committed.
func TestExplodeRefusedElement(t *testing.T) {
	dsn := newDB(t)
	execSQL(t, dsn, explodeTable)
	events := explodeEvents(11)
	events[7].Body = []byte(`{"records":[{"id":"7-0","v":0},{"id":"wrong","v":1},{"id":"7-2","v":2}]}`)
	cp := &checkpointStore{seq: map[string]int64{}}
	if !runPartition(t, newTestSink(t, explodeConfig(t, dsn)), cp, "0", events, 12, nil) {
		t.Fatal("run did not complete")
	}
	var want []int64
	for _, v := range explodedWant(11) {
		if v/10 != 7 {
			want = append(want, v)
		}
	}
	if got := queryInts(t, dsn, `SELECT seq*10+idx FROM elems ORDER BY rid`); !slices.Equal(got, want) {
		t.Fatalf("table holds %v, want %v", got, want)
	}
	if dead := queryInts(t, dsn, `SELECT sequence_number FROM ehsink_dead_letters`); !slices.Equal(dead, []int64{7}) {
		t.Fatalf("dead letters %v, want [7] once", dead)
	}
}

// TestExplodeEmptyArrayMovesWatermark: an event whose array is empty makes
// no row, and the watermark (so the checkpoint) still moves over it.
func TestExplodeEmptyArrayMovesWatermark(t *testing.T) {
	dsn := newDB(t)
	execSQL(t, dsn, explodeTable)
	cp := &checkpointStore{seq: map[string]int64{}}
	s := newTestSink(t, explodeConfig(t, dsn))
	if !runPartition(t, s, cp, "0", explodeEvents(4), 5, nil) { // event 4 holds no record
		t.Fatal("run did not complete")
	}
	if got, _ := cp.get("0"); got != 4 {
		t.Fatalf("checkpoint %d, want 4 (the empty event)", got)
	}
	if got := queryInts(t, dsn, `SELECT seq*10+idx FROM elems ORDER BY rid`); !slices.Equal(got, explodedWant(4)) {
		t.Fatalf("table holds %v, want %v", got, explodedWant(4))
	}
}
