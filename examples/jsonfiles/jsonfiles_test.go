package jsonfiles_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/ehsink/ehsink/examples/jsonfiles"
	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/sinks/sinktest"
	"github.com/ehsink/ehsink/sinks/table"
)

// TestConformance runs the sink through ehsink's conformance kit, each case
// in its own directory: with the bodies as they came, and with a column
// mapping (whose bad event is one whose amount is not a number).
func TestConformance(t *testing.T) {
	t.Run("bodies", func(t *testing.T) { conformance(t, nil, "{not json") })
	var cols table.Columns
	if err := cols.UnmarshalConfig([]any{
		map[string]any{"name": "id", "from": "$.id", "type": "string"},
		map[string]any{"name": "amount", "from": "$.amount", "type": "decimal(12,2)"},
	}); err != nil {
		t.Fatal(err)
	}
	t.Run("columns", func(t *testing.T) { conformance(t, cols, `{"id":"x","amount":"lots"}`) })
}

func conformance(t *testing.T, cols table.Columns, badBody string) {
	root := t.TempDir()
	var mu sync.Mutex
	dirs := map[string]string{}
	dir := func(t *testing.T) string {
		mu.Lock()
		defer mu.Unlock()
		if dirs[t.Name()] == "" {
			dirs[t.Name()] = filepath.Join(root, filepath.Base(t.Name()))
		}
		return dirs[t.Name()]
	}
	sinktest.Run(t, sinktest.Harness{
		New: func(t *testing.T) sinks.Sink {
			s, err := jsonfiles.Driver{}.New(context.Background(), &jsonfiles.Config{Dir: dir(t), Columns: cols}, sinks.Info{})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		Committed: func(t *testing.T, partition string) []int64 {
			files, _ := filepath.Glob(filepath.Join(dir(t), partition, "*.jsonl"))
			slices.Sort(files) // zero-padded names sort by sequence
			var seqs []int64
			for _, f := range files {
				seqs = append(seqs, readSeqs(t, f)...)
			}
			return seqs
		},
		BadEvent: func(p string, seq int64) sinks.Event {
			ev := sinktest.Event(p, seq)
			ev.Body = []byte(badBody)
			return ev
		},
		Fencing: true,
	})
}

func readSeqs(t *testing.T, path string) []int64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l struct {
			Seq int64 `json:"seq"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, l.Seq)
	}
	return out
}

func TestRegistered(t *testing.T) {
	if _, err := (*sinks.Registry)(nil).Lookup("jsonfiles"); err != nil {
		t.Fatal(err)
	}
	if err := (&jsonfiles.Config{}).Validate(); err == nil {
		t.Fatal("a config without dir validated")
	}
}
