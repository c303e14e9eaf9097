package source

import (
	"context"
	"slices"

	"github.com/ehsink/ehsink/sinks"
)

// opened is what Options.Claim opened for one claim of a partition, with
// the position it reported.
type opened struct {
	v  Opened
	wm *sinks.Position
}

// keepOpened holds what Claim opened for partition id until its handler
// takes it; whatever an earlier claim left untaken is closed. It reports
// false, having closed o, when id is no longer claimed.
func (s *Source) keepOpened(ctx context.Context, id string, o opened) bool {
	s.mu.Lock()
	old, had := s.opened[id]
	_, claimed := s.claimed[id]
	if claimed {
		if s.opened == nil {
			s.opened = map[string]opened{}
		}
		s.opened[id] = o
	} else {
		delete(s.opened, id)
	}
	s.mu.Unlock()
	if had {
		s.closeOpenedValue(ctx, id, old)
	}
	if !claimed {
		s.closeOpenedValue(ctx, id, o)
	}
	return claimed
}

// TakeOpened returns what [Options.Claim] opened for this claim of the
// partition (the sink's writer) and the position it reported; the caller
// owns it from then on and must close it. ok is false when there is none:
// Claim is not set, or the claim's resume position was worked out while a
// handler of the partition still ran (Claim then opens nothing).
func (p *Partition) TakeOpened() (v Opened, wm *sinks.Position, ok bool) {
	s := p.s
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.opened[p.id]
	if !ok {
		return nil, nil, false
	}
	delete(s.opened, p.id)
	return o.v, o.wm, true
}

// closeOpened closes what no handler took, of the partitions ids (nil: all).
func (s *Source) closeOpened(ctx context.Context, ids []string) {
	s.mu.Lock()
	var todo []opened
	var names []string
	for id, o := range s.opened {
		if ids == nil || slices.Contains(ids, id) {
			todo = append(todo, o)
			names = append(names, id)
			delete(s.opened, id)
		}
	}
	s.mu.Unlock()
	for i, o := range todo {
		s.closeOpenedValue(ctx, names[i], o)
	}
}

func (s *Source) closeOpenedValue(ctx context.Context, id string, o opened) {
	if o.v == nil {
		return
	}
	if err := o.v.Close(ctx); err != nil {
		s.log.Warn("closing the sink writer of a claim no handler took", "partition", id, "err", err)
	}
}
