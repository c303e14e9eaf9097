package source

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
)

// world is a store's ownership listing, simulated: which replica holds
// which partition, and the rounds the replicas run over it.
type world struct {
	ids   []string
	owner map[string]string
	now   time.Time
	rnd   *rand.Rand
}

func newWorld(partitions int) *world {
	w := &world{owner: map[string]string{}, now: time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC), rnd: rand.New(rand.NewPCG(1, 2))}
	for i := range partitions {
		w.ids = append(w.ids, fmt.Sprint(i))
	}
	return w
}

func (w *world) listing() []azeventhubs.Ownership {
	var out []azeventhubs.Ownership
	for id, o := range w.owner {
		out = append(out, azeventhubs.Ownership{PartitionID: id, OwnerID: o, LastModifiedTime: w.now})
	}
	return out
}

// round runs one claim round of replica me over the current listing and
// applies its claims (every claim wins: the rounds run one at a time). It
// returns how many partitions changed owner.
func (w *world) round(me string) (moved int) {
	claim := planBalanced(w.listing(), w.ids, me, time.Minute, w.now, azeventhubs.Ownership{}, w.rnd)
	for _, o := range claim {
		if o.OwnerID != me {
			panic("a claim not in my name")
		}
		if w.owner[o.PartitionID] != me {
			moved++
		}
		w.owner[o.PartitionID] = me
	}
	return moved
}

func (w *world) counts() map[string]int {
	c := map[string]int{}
	for _, o := range w.owner {
		c[o]++
	}
	return c
}

// balanced reports whether every partition is owned and the counts of the
// replicas differ by at most one.
func (w *world) balanced(replicas ...string) bool {
	if len(w.owner) != len(w.ids) {
		return false
	}
	c := w.counts()
	lo, hi := len(w.ids), 0
	for _, r := range replicas {
		lo, hi = min(lo, c[r]), max(hi, c[r])
	}
	return hi-lo <= 1
}

// TestPlanLoneReplicaTakesAll: a lone replica owns every partition after
// its first round (the SDK's balanced strategy took one per round).
func TestPlanLoneReplicaTakesAll(t *testing.T) {
	for _, n := range []int{1, 32, 1024} {
		w := newWorld(n)
		w.round("a")
		if got := w.counts()["a"]; got != n {
			t.Errorf("%d partitions: a lone replica owns %d after its first round", n, got)
		}
	}
}

// TestPlanReplicasBalanceInARound: replicas started one after another each
// take their share in their first round, and nothing moves afterwards;
// replicas that start within the same round (each planning from the same
// listing) are balanced within three rounds and then stay put.
func TestPlanReplicasBalanceInARound(t *testing.T) {
	for _, tt := range []struct{ partitions, replicas int }{{32, 3}, {100, 3}, {1024, 10}, {4, 10}} {
		t.Run(fmt.Sprintf("%d/%d", tt.partitions, tt.replicas), func(t *testing.T) {
			w := newWorld(tt.partitions)
			var names []string
			for i := range tt.replicas {
				names = append(names, fmt.Sprintf("r%02d", i))
			}
			for i, r := range names {
				w.round(r)
				if !w.balanced(names[:i+1]...) {
					t.Fatalf("after %s's first round: %v, not balanced", r, w.counts())
				}
			}
			for range 3 {
				for _, r := range names {
					if moved := w.round(r); moved != 0 {
						t.Fatalf("steady state: %s took %d partitions (%v)", r, moved, w.counts())
					}
				}
			}
		})
		t.Run(fmt.Sprintf("%d/%d together", tt.partitions, tt.replicas), func(t *testing.T) {
			w := newWorld(tt.partitions)
			var names []string
			for i := range tt.replicas {
				names = append(names, fmt.Sprintf("r%02d", i))
			}
			w.round(names[0])
			// the others plan from the same listing, then claim in turn:
			// a claim another replica made since is lost (etag)
			listing := w.listing()
			claims := map[string][]azeventhubs.Ownership{}
			for _, r := range names[1:] {
				claims[r] = planBalanced(listing, w.ids, r, time.Minute, w.now, azeventhubs.Ownership{}, w.rnd)
			}
			taken := map[string]bool{}
			for _, r := range names[1:] {
				for _, o := range claims[r] {
					if !taken[o.PartitionID] {
						taken[o.PartitionID] = true
						w.owner[o.PartitionID] = r
					}
				}
			}
			rounds := 0
			for ; rounds < 3 && !w.balanced(names...); rounds++ {
				for _, r := range names {
					w.round(r)
				}
			}
			if !w.balanced(names...) {
				t.Fatalf("not balanced after 3 more rounds: %v", w.counts())
			}
			for _, r := range names {
				if moved := w.round(r); moved != 0 {
					t.Fatalf("steady state: %s took %d partitions (%v)", r, moved, w.counts())
				}
			}
		})
	}
}

// TestPlanFailover: the partitions of a replica whose leases expired are
// taken by the survivors in their next round, every one of them.
func TestPlanFailover(t *testing.T) {
	w := newWorld(32)
	names := []string{"a", "b", "c"}
	for _, r := range names {
		w.round(r)
	}
	// c dies: its leases stop being renewed; a and b renew theirs
	w.now = w.now.Add(2 * time.Minute)
	listing := w.listing()
	for i := range listing {
		if listing[i].OwnerID == "c" {
			listing[i].LastModifiedTime = w.now.Add(-2 * time.Minute)
		}
	}
	for _, r := range []string{"a", "b"} {
		claim := planBalanced(listing, w.ids, r, time.Minute, w.now, azeventhubs.Ownership{}, w.rnd)
		for _, o := range claim {
			w.owner[o.PartitionID] = r
		}
		listing = w.listing()
		for i := range listing {
			if listing[i].OwnerID == "c" {
				listing[i].LastModifiedTime = w.now.Add(-2 * time.Minute)
			}
		}
	}
	if c := w.counts(); c["c"] != 0 || c["a"]+c["b"] != 32 {
		t.Fatalf("after one round of each survivor: %v, want a and b owning all 32", c)
	}
}

// TestPlanNewPartitions: partitions the listing has never seen are free.
func TestPlanNewPartitions(t *testing.T) {
	w := newWorld(4)
	w.round("a")
	w.ids = append(w.ids, "4", "5")
	w.round("a")
	if got := w.counts()["a"]; got != 6 {
		t.Fatalf("a owns %d of 6 partitions after the hub grew", got)
	}
}
