package connector

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ehsink/ehsink/internal/deadletters"
	"github.com/ehsink/ehsink/internal/schemaregistry"
	"github.com/ehsink/ehsink/sinks"
)

// A running connector's dead letters, as the operations API shows and
// replays them: the counts its status carries, and the replay beside it.

// LetterReplayer returns the replayer of spec's letters in store: each
// letter's event is decoded with dec (the connector's Avro decoder; nil
// for JSON events) as the running connector decodes it before its filter,
// then judged by spec's filter.
func LetterReplayer(spec *Spec, store deadletters.Store, dec *schemaregistry.Decoder) deadletters.Replayer {
	format := ChangeEvents(spec.Sink.Config)
	r := deadletters.Replayer{
		Store:    store,
		Revision: spec.Revision(),
		Keep:     func(ev *sinks.Event) (bool, error) { return spec.Filter.Keeps(ev, format) },
	}
	if dec != nil {
		r.Prepare = func(ctx context.Context, ev *sinks.Event) (string, error) { return decodeLetter(ctx, dec, ev) }
	}
	return r
}

// decodeLetter replaces a letter's Avro body by its JSON, keeping the
// bytes in RawBody as the runner's decode does. An event the registry's
// answer cannot decode (a schema it still does not know) is refused with
// the reason the runner gave it; a registry that cannot be reached is
// the error: the replay stops rather than mark letters with an outage.
func decodeLetter(ctx context.Context, dec *schemaregistry.Decoder, ev *sinks.Event) (refused string, err error) {
	if len(ev.Body) == 0 {
		return "", nil // a tombstone, handed on as the runner hands it on
	}
	out, err := dec.AppendJSON(ctx, ev.ContentType, ev.Body, nil)
	if errors.Is(err, schemaregistry.ErrPoison) {
		return err.Error(), nil
	}
	if err != nil {
		return "", fmt.Errorf("schema registry: %w", err)
	}
	ev.RawBody, ev.Body = ev.Body, out
	return "", nil
}

// ReplayDecoder returns spec's Avro decoder for a replay outside the
// running process (`ehsink deadletters replay`), or nil for JSON events.
// The built-in emulator's registry lives in the process that runs it: a
// connector reading it replays through that process's operations API.
func ReplayDecoder(spec *Spec) (*schemaregistry.Decoder, error) {
	if spec.Source.Format != FormatAvro {
		return nil, nil
	}
	if spec.Source.Connection.Reveal() == EmulatorConnection {
		if readsEmulatorRegistry(*spec) {
			return nil, errors.New("source.registry: the built-in emulator's registry is served by the `ehsink run` process: " +
				"replay through its operations API (POST /v1/connectors/" + spec.Name + "/deadletters/replay)")
		}
		return newDecoder(*spec, "", &environment{})
	}
	return newDecoder(*spec, spec.Source.Connection, &environment{})
}

// DeadLetterCounts are a connector's dead letters as last counted in its
// sink's store (or, for a sink that keeps none, its dead-letter files).
type DeadLetterCounts struct {
	// Pending counts the letters not replayed.
	Pending int64 `json:"pending"`
	// Replayed counts the letters a replay wrote or the filter dropped.
	Replayed int64 `json:"replayed"`
	// Reasons are the pending letters by reason, the most first, at most
	// maxReasons of them.
	Reasons []ReasonCount `json:"reasons"`
	// OtherReasons counts the pending letters of the reasons past those.
	OtherReasons int64 `json:"other_reasons,omitempty"`
	// At is when they were counted.
	At time.Time `json:"at"`
	// Error is why the last count failed, if it did; the counts are then
	// those of At.
	Error string `json:"error,omitempty"`
}

// ReasonCount is how many pending letters share a reason.
type ReasonCount struct {
	Reason  string `json:"reason"`
	Letters int64  `json:"letters"`
}

// Reasons are free text (a value refused, a schema id): the status keeps
// the most frequent and sums the rest, and cuts each to a line's length.
const (
	maxReasons     = 20
	maxReasonBytes = 300
)

// letterCountEvery is how often a running connector counts its letters
// when none is stored: replays by another process change them too.
const letterCountEvery = time.Minute

// countLetters keeps cs's dead-letter counts from store until ctx ends: at
// once, after each letter stored or replay (cs.lettersChanged), and every
// letterCountEvery, but never two counts within gap: a count is one
// grouped query over the connector's letters (or a read of its files),
// and the status is read far more often than letters are stored.
func (cs *connState) countLetters(ctx context.Context, store deadletters.Store, gap time.Duration) {
	every := max(letterCountEvery, gap)
	var last time.Time
	for {
		if wait := gap - time.Since(last); !last.IsZero() && wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
		last = time.Now()
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		counts, err := store.Counts(cctx, deadletters.Filter{Replayed: true})
		cancel()
		if ctx.Err() != nil {
			return
		}
		cs.setLetterCounts(summarize(counts, cs.now()), err)
		select {
		case <-ctx.Done():
			return
		case <-cs.lettersPoke:
		case <-time.After(every):
		}
	}
}

// summarize sums a store's counts (by partition and reason) into the
// status's.
func summarize(counts []deadletters.Count, now time.Time) *DeadLetterCounts {
	out := &DeadLetterCounts{At: now, Reasons: []ReasonCount{}}
	byReason := map[string]int64{}
	for _, c := range counts {
		out.Pending += c.Letters - c.Replayed
		out.Replayed += c.Replayed
		if n := c.Letters - c.Replayed; n > 0 {
			byReason[c.Reason] += n
		}
	}
	for r, n := range byReason {
		out.Reasons = append(out.Reasons, ReasonCount{Reason: r, Letters: n})
	}
	slices.SortFunc(out.Reasons, func(a, b ReasonCount) int {
		return cmp.Or(cmp.Compare(b.Letters, a.Letters), cmp.Compare(a.Reason, b.Reason))
	})
	if len(out.Reasons) > maxReasons {
		for _, r := range out.Reasons[maxReasons:] {
			out.OtherReasons += r.Letters
		}
		out.Reasons = out.Reasons[:maxReasons]
	}
	for i := range out.Reasons {
		out.Reasons[i].Reason = cutReason(out.Reasons[i].Reason)
	}
	return out
}

// cutReason cuts a reason to maxReasonBytes, at a character's start.
func cutReason(s string) string {
	if len(s) <= maxReasonBytes {
		return s
	}
	n := maxReasonBytes
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

// setLetterCounts records a count, or on err keeps the last one with the
// error.
func (cs *connState) setLetterCounts(c *DeadLetterCounts, err error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if err == nil {
		cs.letters = c
		return
	}
	prev := DeadLetterCounts{Reasons: []ReasonCount{}}
	if cs.letters != nil {
		prev = *cs.letters
	}
	prev.Error = err.Error()
	cs.letters = &prev
}

// lettersChanged asks for a count soon: letters were stored or replayed.
func (cs *connState) lettersChanged() {
	select {
	case cs.lettersPoke <- struct{}{}:
	default: // a count is already asked for
	}
}

// LetterStore is the store of spec's dead letters, given its sink: the
// sink itself when it keeps and marks them (postgres); else a
// [deadletters.WriterStore] replaying them through the sink's own writers,
// over the letters the sink keeps (parquet) or the runner's dead-letter
// files (custom sinks; stdout's can be read, not replayed, as it keeps no
// watermark to mark them). The deadletters commands and the running
// connector's status and replay action use the same.
func LetterStore(sink sinks.Sink, spec *Spec) deadletters.Store {
	switch store := sink.(type) {
	case deadletters.Store:
		return store
	case deadletters.Source:
		return &deadletters.WriterStore{Source: store, Sink: sink, Connector: spec.Name}
	}
	files := deadletters.Files{Dir: spec.Errors.DeadLetter.Dir, Connector: spec.Name}
	if spec.Sink.Type == "stdout" {
		sink = nil
	}
	return &deadletters.WriterStore{Source: files, Sink: sink, Connector: spec.Name}
}

// ReplayResult is what a replay through [Control.ReplayDeadLetters] made
// of the letters it selected.
type ReplayResult struct {
	Connector string `json:"connector"`
	DryRun    bool   `json:"dry_run"`
	deadletters.Tally
	// Refused are the letters that failed again, with their reasons (the
	// first maxRefused).
	Refused []RefusedLetter `json:"refused,omitempty"`
}

// RefusedLetter is a letter a replay could not write.
type RefusedLetter struct {
	ID             int64  `json:"id"`
	Partition      string `json:"partition"`
	SequenceNumber int64  `json:"sequence_number"`
	Reason         string `json:"reason"`
}

// maxRefused bounds ReplayResult.Refused: a replay of a whole store that
// fails again says so in its tally, not in a list of every letter.
const maxRefused = 100

// ReplayDeadLetters replays the letters of a running connector that f
// and ids select (as `ehsink deadletters replay`), through its running
// sink's store and Avro decoder, beside its partitions: it moves no
// watermark. A connector that is neither running nor paused has no sink
// open to replay into: the error then matches ErrConnectorState.
func (c *Control) ReplayDeadLetters(ctx context.Context, name string, f deadletters.Filter, ids []int64, dryRun bool) (ReplayResult, error) {
	cs, err := c.find(name)
	if err != nil {
		return ReplayResult{}, err
	}
	cs.mu.Lock()
	running, state := cs.replayer, cs.state
	cs.mu.Unlock()
	if running == nil {
		return ReplayResult{}, fmt.Errorf("connector %q is %s, its sink is not open: %w", name, state, ErrConnectorState)
	}
	rp := *running
	res := ReplayResult{Connector: name, DryRun: dryRun}
	rp.Report = func(l *deadletters.Letter, out deadletters.Outcome) {
		if out.Reason != "" && len(res.Refused) < maxRefused {
			res.Refused = append(res.Refused, RefusedLetter{ID: l.ID, Partition: l.Event.Partition, SequenceNumber: l.Event.SequenceNumber, Reason: out.Reason})
		}
	}
	res.Tally, err = rp.Replay(ctx, f, ids, dryRun)
	if !dryRun && res.Letters > 0 {
		cs.lettersChanged()
	}
	if err != nil {
		if errors.Is(err, deadletters.ErrReplayUnsupported) {
			err = fmt.Errorf("connector %q: %w", name, err)
		} else {
			err = fmt.Errorf("connector %q: replay stopped after %d of %d letter(s): %w", name,
				res.Replayed+res.Dropped+res.FailedAgain+res.AlreadyReplayed, res.Letters, err)
		}
	}
	return res, err
}

// setReplayer records the replayer of the running connector's letters
// (nil once its sink is closed).
func (cs *connState) setReplayer(r *deadletters.Replayer) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.replayer = r
}
