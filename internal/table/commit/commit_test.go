package commit

import (
	"sync"
	"testing"
)

// TestWithdraw: a commit still queued is taken out and was never made; one
// the writer with the turn took is made once finished (its outcome lost or
// not) and of unknown outcome while it is not.
func TestWithdraw(t *testing.T) {
	type req struct{ Outcome }
	var mu sync.Mutex
	a, b, c := &req{NewOutcome()}, &req{NewOutcome()}, &req{NewOutcome()}
	queue := []*req{a, b}
	if made, unknown := Withdraw(&mu, &queue, a, &a.Outcome); made || unknown || len(queue) != 1 || queue[0] != b {
		t.Fatalf("queued: made %v, unknown %v, queue %v; want false, false, [b]", made, unknown, queue)
	}
	if made, unknown := Withdraw(&mu, &queue, c, &c.Outcome); made || !unknown {
		t.Fatalf("taken, not finished: made %v, unknown %v; want false, true", made, unknown)
	}
	c.Finish(true, false, nil)
	if made, unknown := Withdraw(&mu, &queue, c, &c.Outcome); !made || unknown {
		t.Fatalf("taken and made: made %v, unknown %v; want true, false", made, unknown)
	}
	d := &req{NewOutcome()}
	d.Finish(false, true, nil)
	if made, unknown := Withdraw(&mu, &queue, d, &d.Outcome); !made || !unknown || len(queue) != 1 {
		t.Fatalf("taken, answer lost: made %v, unknown %v, queue %v; want true, true, [b]", made, unknown, queue)
	}
}
