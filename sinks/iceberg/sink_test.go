package iceberg

import (
	"errors"
	"sync"
	"testing"

	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/sinks/sinktest"
)

func TestConformance(t *testing.T) {
	sinktest.Run(t, kitHarness(newLake))
}

// kitHarness is the conformance kit's harness on a lake per kit test,
// made by mk.
func kitHarness(mk func(testing.TB) *lake) sinktest.Harness {
	var mu sync.Mutex
	lakes := map[string]*lake{}
	get := func(t *testing.T) *lake {
		mu.Lock()
		defer mu.Unlock()
		if l, ok := lakes[t.Name()]; ok {
			return l
		}
		l := mk(t)
		lakes[t.Name()] = l
		return l
	}
	return sinktest.Harness{
		New: func(t *testing.T) sinks.Sink { return get(t).newSink(t, nil) },
		Committed: func(t *testing.T, partition string) []int64 {
			return get(t).scanSeqs(t)[partition]
		},
		BadEvent: func(partition string, seq int64) sinks.Event {
			e := sinktest.Event(partition, seq)
			e.Body = []byte(`{"id":"bad","seq":4,"customer":"c","amount":"not a number","ts":"2026-01-02T03:04:05Z"}`)
			return e
		},
		Fencing: true,
		// The data and the watermark are one catalog swap; the hook fails
		// the Flush after the swap, as a process killed before it heard
		// the catalog's answer.
		InterruptCommit: func(t *testing.T, s sinks.Sink) {
			s.(*sink).setHook(func(step string) error {
				if step == stepAfterSwap {
					return errors.New("injected: killed after the catalog swap")
				}
				return nil
			})
		},
	}
}
