package delta

import (
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/sinks/sinktest"
)

func TestConformance(t *testing.T) {
	caseDir := caseDirs()
	dir := func(t *testing.T) string { return filepath.Join(caseDir(t), "table") }
	sinktest.Run(t, sinktest.Harness{
		New: func(t *testing.T) sinks.Sink { return newTestSink(t, dir(t), nil) },
		Committed: func(t *testing.T, partition string) []int64 {
			return seqsOf(readRows(t, dir(t)))[partition]
		},
		BadEvent:        badEvent,
		Fencing:         true,
		InterruptCommit: interruptCommit,
	})
}

// caseDirs returns the folder of a conformance case, given any test of
// it: one per case, shared by the sinks the case starts.
func caseDirs() func(t *testing.T) string {
	var mu sync.Mutex
	dirs := map[string]string{}
	return func(t *testing.T) string {
		mu.Lock()
		defer mu.Unlock()
		name := strings.SplitN(t.Name(), "/", 3)[1]
		if dirs[name] == "" {
			dirs[name] = t.TempDir()
		}
		return dirs[name]
	}
}

// badEvent is an event whose amount does not convert to its column.
func badEvent(partition string, seq int64) sinks.Event {
	e := sinktest.Event(partition, seq)
	e.Body = []byte(`{"id":"bad","seq":4,"customer":"c","amount":"not a number","ts":"2026-01-02T03:04:05Z"}`)
	return e
}

// interruptCommit arms s to fail its next Flush after the commit file is
// created, as a process killed before it heard that its commit was made:
// the data and the txn are one commit file, so there is no instant
// between them.
func interruptCommit(t *testing.T, s sinks.Sink) {
	s.(*sink).setHook(func(step string) error {
		if step == stepCommitted {
			return errors.New("injected: killed after the commit file was created")
		}
		return nil
	})
}
