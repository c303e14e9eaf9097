package sinktest

import (
	"context"
	"fmt"
	"github.com/ehsink/ehsink/dedupe"
	"slices"
	"sync"

	"github.com/ehsink/ehsink/sinks"
)

// FaultPoint names a step of a writer where a [Memory] sink can be made to fail.
type FaultPoint string

// The fault points of a [Memory] sink, in the order a flush meets them.
const (
	// BeforeWrite fails Write before it takes anything.
	BeforeWrite FaultPoint = "before-write"
	// BeforeCommit fails Flush before anything becomes durable.
	BeforeCommit FaultPoint = "before-commit"
	// BeforeWatermark fails Flush after the data became durable and before
	// the watermark record is written, as a process killed between the two
	// steps would.
	BeforeWatermark FaultPoint = "before-watermark"
	// AfterCommit fails Flush after the data became durable, as a connection
	// lost while the commit was acknowledged would.
	AfterCommit FaultPoint = "after-commit"
)

// Memory is an in-memory sink whose committed state outlives its writers,
// so a test can stand for a process restart by opening a new writer.
//
// A commit has two steps, as in a sink that keeps a watermark record apart
// from its data: first the data, marked with the position it reaches, then
// the watermark record. Memory is fenced by default: it reads its watermark
// back from the data (the later of the two), and drops at commit time the
// events that watermark covers, so a crash between the steps
// ([BeforeWatermark]) and two owners at once write nothing twice. Memory is
// safe for concurrent use.
type Memory struct {
	mu         sync.Mutex // guards the fields below
	committed  map[string][]sinks.Event
	marks      map[string]sinks.Position // the position each partition's data reaches, written with it
	watermarks map[string]sinks.Position // the watermark record, written after the data
	dead       map[string][]sinks.DeadLetter
	fault      func(point FaultPoint, partition string) error
	reject     func(ev *sinks.Event) error
	refuse     func(ev *sinks.Event) error
	unfenced   bool
}

// NewMemory returns an empty in-memory sink.
func NewMemory() *Memory {
	return &Memory{
		committed:  make(map[string][]sinks.Event),
		marks:      make(map[string]sinks.Position),
		watermarks: make(map[string]sinks.Position),
		dead:       make(map[string][]sinks.DeadLetter),
	}
}

// SetFault installs fn, called at every fault point; a non-nil result fails
// the step with that error. nil removes the hook.
func (m *Memory) SetFault(fn func(point FaultPoint, partition string) error) {
	m.mu.Lock()
	m.fault = fn
	m.mu.Unlock()
}

// SetFencing turns fencing on (the default) or off. Without it the sink
// trusts its writers: it commits whatever it is given, duplicates included,
// and reports the watermark record alone, which lets a test see whether the
// code driving the sink drops what the watermark covers (and is the broken
// sink the conformance kit must catch).
func (m *Memory) SetFencing(on bool) {
	m.mu.Lock()
	m.unfenced = !on
	m.mu.Unlock()
}

// SetReject installs fn, called for every written event; a non-nil result
// rejects the event as one that cannot be written (reported in a
// [sinks.BatchError]).
func (m *Memory) SetReject(fn func(ev *sinks.Event) error) {
	m.mu.Lock()
	m.reject = fn
	m.mu.Unlock()
}

// SetRefuse installs fn, called at Flush for every event written since
// the last commit; a non-nil result refuses the event as a database refuses
// a row that breaks a constraint: Flush commits nothing and returns a
// [sinks.RejectedError], and reports it again until the event is given to
// DeadLetter.
func (m *Memory) SetRefuse(fn func(ev *sinks.Event) error) {
	m.mu.Lock()
	m.refuse = fn
	m.mu.Unlock()
}

// Committed returns the sequence numbers the sink durably holds for a partition, in commit order.
func (m *Memory) Committed(partition string) []int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]int64, len(m.committed[partition]))
	for i, ev := range m.committed[partition] {
		out[i] = ev.SequenceNumber
	}
	return out
}

// Events returns copies of the events the sink durably holds for a partition.
func (m *Memory) Events(partition string) []sinks.Event {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.committed[partition])
}

// DeadLetters returns the dead letters committed for a partition.
func (m *Memory) DeadLetters(partition string) []sinks.DeadLetter {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.dead[partition])
}

// Driver returns a driver whose sinks all write to m, for registering in a
// test's own [sinks.Registry]. Its config takes no keys.
func (m *Memory) Driver() sinks.Driver { return memoryDriver{m} }

type memoryDriver struct{ m *Memory }

func (d memoryDriver) NewConfig() any { return &struct{}{} }

func (d memoryDriver) New(context.Context, any, sinks.Info) (sinks.Sink, error) { return d.m, nil }

func (m *Memory) faultAt(p FaultPoint, partition string) error {
	m.mu.Lock()
	f := m.fault
	m.mu.Unlock()
	if f == nil {
		return nil
	}
	return f(p, partition)
}

// Open implements [sinks.Sink].
func (m *Memory) Open(_ context.Context, partition string) (sinks.Writer, *sinks.Position, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return &memoryWriter{m: m, partition: partition}, m.watermark(partition), nil
}

// watermark is what the sink holds of a partition: the later of its data's
// mark and its watermark record when fenced, the record alone when not.
// m.mu must be held.
func (m *Memory) watermark(partition string) *sinks.Position {
	var out *sinks.Position
	if pos, ok := m.watermarks[partition]; ok {
		out = &pos
	}
	if m.unfenced {
		return out
	}
	if pos, ok := m.marks[partition]; ok {
		out = dedupe.Later(out, &pos)
	}
	return out
}

// Close implements [sinks.Sink]; the committed state stays readable.
func (m *Memory) Close(context.Context) error { return nil }

type memoryWriter struct {
	m         *Memory
	partition string
	pending   []sinks.Event
	letters   []sinks.DeadLetter
	refused   []sinks.RejectedEvent // held apart until DeadLetter
	last      *sinks.Position       // last event handed to Write
	closed    bool
}

func (w *memoryWriter) Write(_ context.Context, events []sinks.Event) error {
	if w.closed {
		return sinks.ErrClosed
	}
	if err := w.m.faultAt(BeforeWrite, w.partition); err != nil {
		return err
	}
	w.m.mu.Lock()
	reject := w.m.reject
	w.m.mu.Unlock()
	var failed []sinks.EventError
	for i := range events {
		ev := events[i]
		if reject != nil {
			if err := reject(&ev); err != nil {
				failed = append(failed, sinks.EventError{Index: i, Err: err})
				continue
			}
		}
		// Copy what the caller may reuse.
		ev.Body = slices.Clone(ev.Body)
		w.pending = append(w.pending, ev)
	}
	if len(events) > 0 {
		p := events[len(events)-1].Position()
		w.last = &p
	}
	if failed != nil {
		return &sinks.BatchError{Failed: failed}
	}
	return nil
}

func (w *memoryWriter) DeadLetter(_ context.Context, letters []sinks.DeadLetter) error {
	if w.closed {
		return sinks.ErrClosed
	}
	w.letters = append(w.letters, letters...)
	for _, l := range letters {
		w.refused = slices.DeleteFunc(w.refused, func(r sinks.RejectedEvent) bool {
			return r.Event.SequenceNumber == l.Event.SequenceNumber
		})
	}
	return nil
}

func (w *memoryWriter) Flush(context.Context) (*sinks.Position, error) {
	if w.closed {
		return nil, sinks.ErrClosed
	}
	if err := w.m.faultAt(BeforeCommit, w.partition); err != nil {
		return nil, err
	}
	m := w.m
	m.mu.Lock()
	refuse := m.refuse
	m.mu.Unlock()
	if refuse != nil && len(w.refused) == 0 {
		w.pending = slices.DeleteFunc(w.pending, func(ev sinks.Event) bool {
			if err := refuse(&ev); err != nil {
				w.refused = append(w.refused, sinks.RejectedEvent{Event: ev, Err: err})
				return true
			}
			return false
		})
	}
	if len(w.refused) > 0 {
		return nil, &sinks.RejectedError{Rejected: slices.Clone(w.refused)}
	}
	// The data, marked with the position it reaches.
	m.mu.Lock()
	var fence *sinks.Position // nil: nothing to drop
	if !m.unfenced {
		fence = m.watermark(w.partition)
	}
	for _, ev := range w.pending {
		if dedupe.Covers(fence, ev.SequenceNumber) {
			continue // fenced: another writer committed it already
		}
		m.committed[w.partition] = append(m.committed[w.partition], ev)
	}
	for _, dl := range w.letters {
		if dedupe.Covers(fence, dl.Event.SequenceNumber) {
			continue
		}
		m.dead[w.partition] = append(m.dead[w.partition], dl)
	}
	last := w.last
	if mark, ok := m.marks[w.partition]; ok {
		last = dedupe.Later(&mark, last)
	}
	if last != nil {
		m.marks[w.partition] = *last
	}
	m.mu.Unlock()
	w.pending, w.letters = w.pending[:0], w.letters[:0]
	if err := m.faultAt(BeforeWatermark, w.partition); err != nil {
		return nil, err
	}
	// The watermark record.
	m.mu.Lock()
	if wm, ok := m.watermarks[w.partition]; w.last != nil && (!ok || w.last.SequenceNumber > wm.SequenceNumber) {
		m.watermarks[w.partition] = *w.last
	}
	out := m.watermark(w.partition)
	m.mu.Unlock()
	if err := m.faultAt(AfterCommit, w.partition); err != nil {
		return nil, err
	}
	return out, nil
}

func (w *memoryWriter) Close(context.Context) error {
	w.closed = true
	w.pending, w.letters, w.refused = nil, nil, nil
	return nil
}

// String names the sink in test failures.
func (m *Memory) String() string { return fmt.Sprintf("sinktest.Memory(%p)", m) }
