package deadletters

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ehsink/ehsink/sinks"
)

// ErrReplayUnsupported is returned by the Replay of a store that can be
// read but not replayed.
var ErrReplayUnsupported = errors.New("replay is not supported for this store")

// Source reads the dead letters a connector's sink cannot mark itself: the
// runner's dead-letter files ([Files]), the Parquet sink's.
type Source interface {
	// ReadLetters returns every letter, each with its stable ID.
	ReadLetters(ctx context.Context) ([]Letter, error)
}

// replayPrefix begins the name of every replay partition.
const replayPrefix = "deadletter."

// ReplayPartition is the partition [WriterStore] opens a writer for to
// replay the event at seq of partition: "deadletter.<partition>.<seq>".
// The sink's watermark of it, which the sink keeps with its data as for
// any partition, is the mark that the event was replayed.
func ReplayPartition(partition string, seq int64) string {
	return replayPrefix + partition + "." + strconv.FormatInt(seq, 10)
}

// IsReplayPartition reports whether partition is a [ReplayPartition].
func IsReplayPartition(partition string) bool { return strings.HasPrefix(partition, replayPrefix) }

// WriterStore is the Store of letters a sink does not mark itself: it reads
// them from Source and replays each through Sink's own writer, opened for
// the letter's [ReplayPartition]. The event keeps its partition and
// sequence number; the sink's commit of that writer is the mark (the
// watermark Open then returns), so a replay stopped at any moment and run
// again writes each event once, the sink's dedupe of a partition being
// what makes a commit once. The real partitions' watermarks are left
// alone.
//
// A letter whose event fails again keeps its old reason: its source is
// append-only. A letter the current filter drops is marked through a
// writer that stores dead letters itself ([sinks.DeadLetterer]: the
// letter committed as its replay partition's only dead letter, no row);
// with another writer it stays unmarked and is dropped again by the next
// replay, which writes nothing either. It is safe for concurrent use if
// Sink and Source are.
type WriterStore struct {
	Source Source
	// Sink is the connector's sink; nil for one that keeps no watermark
	// (stdout), whose letters are read and cannot be replayed.
	Sink sinks.Sink
	// Connector names the connector in Counts.
	Connector string
	// now is the clock of the mark of a dropped letter; nil is time.Now.
	now func() time.Time
	// marked holds the replay partitions found committed.
	marked sync.Map
}

var _ Store = (*WriterStore)(nil)

// Letters implements Store.
func (r *WriterStore) Letters(ctx context.Context, f Filter) ([]Letter, error) {
	all, err := r.Source.ReadLetters(ctx)
	if err != nil {
		return nil, err
	}
	var out []Letter
	marked := map[string]bool{} // by replay partition
	for _, l := range all {
		if !f.Selects(&l) {
			continue
		}
		p := ReplayPartition(l.Event.Partition, l.Event.SequenceNumber)
		done, seen := marked[p]
		if !seen {
			if done, err = r.replayed(ctx, p); err != nil {
				return nil, fmt.Errorf("letter %d: %w", l.ID, err)
			}
			marked[p] = done
		}
		if done {
			if !f.Replayed {
				continue
			}
			// The mark keeps no time: the zero time says "replayed".
			l.ReplayedAt = new(time.Time)
		}
		out = append(out, l)
	}
	slices.SortStableFunc(out, func(a, b Letter) int { return cmp.Compare(a.FailedAt.UnixNano(), b.FailedAt.UnixNano()) })
	return out, nil
}

// replayed reports whether the sink committed replay partition p. A
// mark is never undone, so one found is remembered: a running connector
// counts its letters every minute, and each look is an Open.
func (r *WriterStore) replayed(ctx context.Context, p string) (done bool, err error) {
	if r.Sink == nil {
		return false, nil
	}
	if _, ok := r.marked.Load(p); ok {
		return true, nil
	}
	defer func() {
		if done {
			r.marked.Store(p, true)
		}
	}()
	w, wm, err := r.Sink.Open(ctx, p)
	if err != nil {
		return false, fmt.Errorf("open %s: %w", p, err)
	}
	if err := w.Close(ctx); err != nil {
		return false, fmt.Errorf("close %s: %w", p, err)
	}
	return wm != nil, nil
}

// Counts implements Store.
func (r *WriterStore) Counts(ctx context.Context, f Filter) ([]Count, error) {
	letters, err := r.Letters(ctx, f)
	if err != nil {
		return nil, err
	}
	return CountLetters(letters), nil
}

// Replay implements Store: it writes l's event through a writer of its
// replay partition and commits it, unless that partition's watermark says
// a replay committed it already.
func (r *WriterStore) Replay(ctx context.Context, l *Letter, o ReplayOptions) (Outcome, error) {
	if r.Sink == nil {
		return Outcome{}, fmt.Errorf("letter %d: %w (its sink keeps no watermark to mark it replayed)", l.ID, ErrReplayUnsupported)
	}
	p := ReplayPartition(l.Event.Partition, l.Event.SequenceNumber)
	fail := func(what string, err error) (Outcome, error) {
		return Outcome{}, fmt.Errorf("letter %d: %s %s: %w", l.ID, what, p, err)
	}
	w, wm, err := r.Sink.Open(ctx, p)
	if err != nil {
		return fail("open", err)
	}
	// Closing without a Flush abandons what was written: a dry run, an
	// event that fails again.
	defer w.Close(context.WithoutCancel(ctx))
	if wm != nil {
		return Outcome{AlreadyReplayed: true}, nil
	}
	out := Outcome{Dropped: o.Drop, Reason: o.Refused}
	switch {
	case out.Reason != "":
		return out, nil
	case o.Drop:
		dl, ok := w.(sinks.DeadLetterer)
		out.Unmarked = !ok
		if !ok || o.DryRun {
			return out, nil
		}
		now := time.Now
		if r.now != nil {
			now = r.now
		}
		mark := sinks.DeadLetter{Event: l.Event, Reason: "replay: dropped by the connector's filter", FailedAt: now()}
		if err := dl.DeadLetter(WithRevision(ctx, o.Revision), []sinks.DeadLetter{mark}); err != nil {
			return fail("mark", err)
		}
	default:
		err := w.Write(ctx, []sinks.Event{l.Event})
		var be *sinks.BatchError
		if errors.As(err, &be) {
			out.Reason = eventErrors(be.Failed)
			return out, nil
		}
		if err != nil {
			return fail("write", err)
		}
		out.Rows = []Row{{Table: p, Columns: []string{"partition", "sequence_number"}, Values: []any{l.Event.Partition, l.Event.SequenceNumber}}}
		if o.DryRun {
			return out, nil
		}
	}
	mark, err := w.Flush(ctx)
	var re *sinks.RejectedError
	switch {
	case errors.Is(err, sinks.ErrFenced):
		// Another replay of the letter committed first.
		return Outcome{AlreadyReplayed: true}, nil
	case errors.As(err, &re):
		reasons := make([]string, len(re.Rejected))
		for i, e := range re.Rejected {
			reasons[i] = e.Err.Error()
		}
		return Outcome{Reason: strings.Join(reasons, "; ")}, nil
	case err != nil:
		return fail("flush", err)
	case mark == nil:
		return out, fmt.Errorf("letter %d: replay partition %s: the sink committed the event and reported no watermark, so nothing marks it replayed: a second replay writes it again (see sinktest's ReplayPartition case)", l.ID, p)
	}
	return out, nil
}

// eventErrors joins the reasons of failed events.
func eventErrors(failed []sinks.EventError) string {
	reasons := make([]string, len(failed))
	for i, f := range failed {
		reasons[i] = f.Err.Error()
	}
	return strings.Join(reasons, "; ")
}
