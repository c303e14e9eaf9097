package parquet

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/ehsink/ehsink/internal/deadletters"
)

var _ deadletters.Source = (*sink)(nil)

// ReadLetters implements deadletters.Source: the letters of the
// dead-letter files of every partition, taken by partition and range, a
// letter's ID counting the letters of its partition from the oldest file
// on (a range is committed once, and later commits have higher ranges).
// The files of replay partitions (a letter marked dropped by a replay)
// are not letters. `ehsink deadletters replay` writes a letter through a
// writer of its replay partition (deadletters.WriterStore): a commit of that
// partition, files named as the template says with deadletter.<partition>.<seq>
// for {partition}, is the mark.
func (s *sink) ReadLetters(ctx context.Context) ([]deadletters.Letter, error) {
	vars := nameVars{eventHub: s.info.EventHub, connector: s.info.Connector, consumerGroup: s.info.ConsumerGroup, anyPartition: true}
	m := s.dlTmpl.matcher(vars)
	objs, err := s.store.list(ctx, m.prefix)
	if err != nil {
		return nil, fmt.Errorf("parquet: connector %q: dead letters: %w", s.info.Connector, err)
	}
	type file struct {
		name, partition string
		first           int64
	}
	var files []file
	for _, o := range objs {
		p, ok := m.partition(o.name)
		first, _, isFile := m.match(o.name)
		if ok && isFile && !deadletters.IsReplayPartition(p) {
			files = append(files, file{o.name, p, first})
		}
	}
	slices.SortFunc(files, func(a, b file) int {
		return cmp.Or(cmp.Compare(a.partition, b.partition), cmp.Compare(a.first, b.first))
	})
	var out []deadletters.Letter
	var n int64 // letters of the partition so far
	for i, f := range files {
		if i > 0 && files[i-1].partition != f.partition {
			n = 0
		}
		b, err := s.store.read(ctx, f.name)
		if err != nil {
			return nil, fmt.Errorf("parquet: connector %q: dead letters: %w", s.info.Connector, err)
		}
		letters, err := deadletters.ReadLines(ctx, bytes.NewReader(b), s.info.Connector, f.name, n)
		if err != nil {
			return nil, fmt.Errorf("parquet: connector %q: %w", s.info.Connector, err)
		}
		n += int64(len(letters))
		out = append(out, letters...)
	}
	return out, nil
}
