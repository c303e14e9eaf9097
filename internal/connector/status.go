package connector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
	hamba "github.com/hamba/avro/v2"

	"github.com/ehsink/ehsink/internal/deadletters"
)

// ErrUnknownConnector is matched (errors.Is) by [Control] calls naming a
// connector that Run does not run.
var ErrUnknownConnector = errors.New("no such connector")

// ErrConnectorState is matched (errors.Is) by a [Control] call the
// connector's state does not allow (resuming a connector that is not
// paused, pausing one that failed).
var ErrConnectorState = errors.New("not possible in the connector's state")

// State is a connector's state as [Control] reports it.
type State string

// The states of a connector.
const (
	StateStarting        State = stateStarting        // building its sink and source
	StateSinkUnavailable State = stateSinkUnavailable // waiting for a sink unreachable at start, holding no partition
	StateRunning         State = stateRunning         // owning and moving partitions
	StatePaused          State = statePaused          // holding its leases, receiving nothing
	StateFailed          State = stateFailed          // stopped on a permanent error; the others run on
	StateStopped         State = stateStopped         // stopped by the process's shutdown
)

// ConnectorStatus is a snapshot of one connector in this process.
type ConnectorStatus struct {
	Name          string    `json:"name"`               // the connector's name in the config
	State         State     `json:"state"`              // what the connector is doing
	Since         time.Time `json:"since"`              // when the connector entered State
	OwnerID       string    `json:"owner_id,omitempty"` // this process's owner ID in the ownership leases
	EventHub      string    `json:"eventhub"`           // the event hub it reads
	ConsumerGroup string    `json:"consumer_group"`     // the consumer group it reads with
	SinkType      string    `json:"sink_type"`          // the sink's type, as in sink.type
	// Source and Sink say whether the connector reached them: the source
	// once its client checked the event hub, the sink by the outcome of its
	// last call.
	Source Reach `json:"source"`
	Sink   Reach `json:"sink"` // see Source
	// Store says whether the last checkpoint the connector wrote reached
	// the checkpoint store; nil before the first one. A store that does
	// not answer cannot renew the leases either.
	Store *Reach `json:"store,omitempty"`
	// Partitions are those this process owns now, by ID.
	Partitions []PartitionStatus `json:"partitions"`
	// LastError is the connector's last failure, if any.
	LastError *TimedError `json:"last_error,omitempty"`
	// DeadLetters are its dead letters as last counted; nil before the
	// first count.
	DeadLetters *DeadLetterCounts `json:"dead_letters,omitempty"`
}

// Reach is whether a connector reached its source or its sink, and when
// that was last known.
type Reach struct {
	OK    bool      `json:"ok"`              // reached at the last attempt
	Error string    `json:"error,omitempty"` // why not, when not OK
	At    time.Time `json:"at"`              // when that was last known
}

// TimedError is an error message with its time.
type TimedError struct {
	Message string    `json:"message"` // the error's text
	At      time.Time `json:"at"`      // when it happened
}

// PartitionStatus is the state of one owned partition. A nil sequence
// number is not known (yet).
type PartitionStatus struct {
	ID string `json:"id"` // the partition ID
	// Watermark is the sequence number the sink last committed.
	Watermark *int64 `json:"watermark"`
	// Checkpoint is the sequence number of the last checkpoint this
	// process wrote.
	Checkpoint *int64 `json:"checkpoint"`
	// LastEnqueued is the partition's last enqueued sequence number: from
	// its properties, refreshed on an interval, or a later event received.
	LastEnqueued *int64 `json:"last_enqueued"`
	// Lag is LastEnqueued minus Watermark (minus the partition's beginning
	// when nothing was committed).
	Lag *int64 `json:"lag"`
	// LagSeconds is now minus the enqueued time of the last committed
	// event while Lag is above 0; 0 otherwise.
	LagSeconds float64 `json:"lag_seconds"`
	// Committed counts the events this process committed for the partition.
	Committed int64 `json:"committed"`
	// LastCommit is when this process last committed events of it.
	LastCommit *time.Time `json:"last_commit,omitempty"`
	// Paused is true once the partition holds nothing unflushed and waits
	// for a resume.
	Paused bool `json:"paused"`
}

// NotReady returns why the connector is not ready, or "" when it is: it
// runs (or is paused) and reached its source and its sink.
func (s ConnectorStatus) NotReady() string {
	var why []string
	switch s.State {
	case StateRunning, StatePaused:
	case StateFailed, StateStopped:
		msg := string(s.State)
		if s.LastError != nil {
			msg += ": " + s.LastError.Message
		}
		why = append(why, msg)
	default:
		why = append(why, string(s.State))
	}
	// A part never tried (the source waits for the sink at start) is not
	// one that failed: saying "not reached" would send the reader to the
	// wrong system.
	switch {
	case s.Source.OK:
	case s.Source.At.IsZero():
		why = append(why, "source not tried yet")
	default:
		why = append(why, "source not reached"+suffix(s.Source.Error))
	}
	switch {
	case s.Sink.OK:
	case s.Sink.At.IsZero():
		why = append(why, "sink not tried yet")
	default:
		why = append(why, "sink not reached"+suffix(s.Sink.Error))
	}
	if s.Store != nil && !s.Store.OK {
		why = append(why, "checkpoint store not reached"+suffix(s.Store.Error))
	}
	return strings.Join(why, "; ")
}

func suffix(err string) string {
	if err == "" {
		return ""
	}
	return ": " + err
}

// Control shows and steers the connectors Run runs: a status snapshot of
// each, pause, resume, restart and the replay of its dead letters. Make
// one with [NewControl], pass it in [RunOptions], and call it from any
// goroutine while Run runs (or after: the statuses then say stopped). It
// is safe for concurrent use.
type Control struct {
	now func() time.Time

	mu    sync.Mutex // guards conns
	conns []*connState
}

// NewControl returns a Control with no connectors; Run adds its own.
func NewControl() *Control {
	return &Control{now: time.Now}
}

// add registers a connector, or returns the one registered under its
// name. Its state changes are mirrored into met's ehsink_connector_state.
func (c *Control) add(name string, met *Metrics) *connState {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cs := range c.conns {
		if cs.name == name {
			return cs
		}
	}
	cs := &connState{name: name, now: c.now, met: met, state: StateStarting, since: c.now(),
		gate: newGate(), restart: make(chan struct{}, 1), lettersPoke: make(chan struct{}, 1), props: map[string]azeventhubs.PartitionProperties{}}
	met.connectorState(name, string(StateStarting))
	c.conns = append(c.conns, cs)
	return cs
}

func (c *Control) find(name string) (*connState, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cs := range c.conns {
		if cs.name == name {
			return cs, nil
		}
	}
	return nil, fmt.Errorf("connector %q: %w", name, ErrUnknownConnector)
}

// Statuses returns a snapshot of every connector, in config order.
func (c *Control) Statuses() []ConnectorStatus {
	c.mu.Lock()
	conns := slices.Clone(c.conns)
	c.mu.Unlock()
	out := make([]ConnectorStatus, len(conns))
	for i, cs := range conns {
		out[i] = cs.status()
	}
	return out
}

// Status returns a snapshot of one connector.
func (c *Control) Status(name string) (ConnectorStatus, error) {
	cs, err := c.find(name)
	if err != nil {
		return ConnectorStatus{}, err
	}
	return cs.status(), nil
}

// Pause pauses a connector: each of its partitions flushes and
// checkpoints what it holds, then receives nothing until Resume. The
// partitions' leases are kept. Pausing a paused connector does nothing.
func (c *Control) Pause(name string) error {
	cs, err := c.find(name)
	if err != nil {
		return err
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	switch cs.state {
	case StateFailed, StateStopped:
		return fmt.Errorf("connector %q is %s: %w", name, cs.state, ErrConnectorState)
	}
	cs.gate.set(true)
	if cs.state == StateRunning {
		cs.setLocked(StatePaused)
	}
	return nil
}

// Resume lets a paused connector receive again, from where it stopped.
func (c *Control) Resume(name string) error {
	cs, err := c.find(name)
	if err != nil {
		return err
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if !cs.gate.isPaused() {
		return fmt.Errorf("connector %q is %s, not paused: %w", name, cs.state, ErrConnectorState)
	}
	cs.gate.set(false)
	if cs.state == StatePaused {
		cs.setLocked(StateRunning)
	}
	return nil
}

// Restart stops a connector (its partitions drain: flush and checkpoint)
// and builds its sink and source again. A paused connector stays paused.
// A failed or stopped connector cannot be restarted (restart the process).
func (c *Control) Restart(name string) error {
	cs, err := c.find(name)
	if err != nil {
		return err
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.state == StateStopped || cs.state == StateFailed {
		return fmt.Errorf("connector %q is %s: %w", name, cs.state, ErrConnectorState)
	}
	cs.requestRestart()
	return nil
}

// connState is what Control knows of one connector. The connector's
// goroutine writes it; API calls read it.
type connState struct {
	name    string
	now     func() time.Time
	met     *Metrics
	gate    *gate
	restart chan struct{} // a pending restart request, buffered 1

	autoMu sync.Mutex     // guards extra
	extra  []hamba.Schema // writer schemas whose fields columns: auto added, oldest first

	mu            sync.Mutex // guards the fields below
	state         State
	since         time.Time
	ownerID       string
	eventHub      string
	consumerGroup string
	sinkType      string
	source, sink  Reach
	sourceDown    time.Time // since when calls to the source fail, zero while they succeed
	store         *Reach
	lastErr       *TimedError
	runner        *Runner
	props         map[string]azeventhubs.PartitionProperties // by partition ID
	replayer      *deadletters.Replayer                      // the running sink's letters, nil while it is not open
	letters       *DeadLetterCounts                          // the last count, kept across restarts

	lettersPoke chan struct{} // a count asked for (letters stored or replayed), buffered 1
}

// setLocked moves to state s; a running connector whose gate is closed is
// paused. cs.mu is held.
func (cs *connState) setLocked(s State) {
	if s == StateRunning && cs.gate.isPaused() {
		s = StatePaused
	}
	if cs.state != s {
		cs.state, cs.since = s, cs.now()
		cs.met.connectorState(cs.name, string(s))
	}
}

func (cs *connState) set(s State) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.setLocked(s)
}

func (cs *connState) failed(err error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.setLocked(StateFailed)
	cs.lastErr = &TimedError{Message: err.Error(), At: cs.now()}
}

// reach records the outcome of a call to the source or the sink.
func (cs *connState) reach(r *Reach, err error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	*r = Reach{OK: err == nil, At: cs.now()}
	if err != nil {
		r.Error = err.Error()
	}
}

func (cs *connState) sourceReached(err error) {
	cs.reach(&cs.source, err)
	cs.mu.Lock()
	defer cs.mu.Unlock()
	switch {
	case err == nil:
		cs.sourceDown = time.Time{}
	case cs.sourceDown.IsZero():
		cs.sourceDown = cs.now()
	}
}

// sourceDownSince is when the calls to the source began to fail without
// one succeeding since (zero when the last succeeded).
func (cs *connState) sourceDownSince() time.Time {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.sourceDown
}

// sinkUnavailable records a sink unreachable at start.
func (cs *connState) sinkUnavailable(err error) {
	cs.sinkReached(err)
	cs.set(StateSinkUnavailable)
}
func (cs *connState) sinkReached(err error) { cs.reach(&cs.sink, err) }

// storeReached records the outcome of a checkpoint call.
func (cs *connState) storeReached(err error) {
	r := &Reach{}
	cs.reach(r, err)
	cs.mu.Lock()
	cs.store = r
	cs.mu.Unlock()
}

// run runs attempt until it returns, starting it again each time a
// Restart cancelled it; ctx bounds the whole.
func (cs *connState) run(ctx context.Context, log *slog.Logger, attempt func(context.Context) error) error {
	for {
		actx, cancel := context.WithCancel(ctx)
		restarted := make(chan struct{})
		watching := make(chan struct{})
		go func() {
			defer close(watching)
			select {
			case <-cs.restart:
				close(restarted)
				cancel()
			case <-actx.Done():
			}
		}()
		err := attempt(actx)
		cancel()
		<-watching
		select {
		case <-restarted:
			if ctx.Err() == nil {
				log.Info("connector restarting", "stopped_with", err)
				cs.set(StateStarting)
				continue
			}
		default:
		}
		return err
	}
}

// requestRestart asks the connector to restart, as Control.Restart does.
func (cs *connState) requestRestart() {
	select {
	case cs.restart <- struct{}{}:
	default: // a restart is already pending
	}
}

// addAutoExtra records a writer schema whose fields the next start's
// columns: auto derivation adds: the registry's newest schema may lack
// them (an older producer still writing, a field removed since).
func (cs *connState) addAutoExtra(w hamba.Schema) {
	cs.autoMu.Lock()
	defer cs.autoMu.Unlock()
	cs.extra = append(cs.extra, w)
}

func (cs *connState) autoExtra() []hamba.Schema {
	cs.autoMu.Lock()
	defer cs.autoMu.Unlock()
	return slices.Clone(cs.extra)
}

// describe records what the connector reads and where it writes.
func (cs *connState) describe(eventHub, consumerGroup, sinkType string) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.eventHub, cs.consumerGroup, cs.sinkType = eventHub, consumerGroup, sinkType
}

// started records that the connector runs r under owner.
func (cs *connState) started(r *Runner, owner string) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.runner, cs.ownerID = r, owner
	cs.setLocked(StateRunning)
}

func (cs *connState) setRunner(r *Runner) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.runner = r
}

func (cs *connState) setProps(p azeventhubs.PartitionProperties) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.props[p.PartitionID] = p
}

func (cs *connState) status() ConnectorStatus {
	cs.mu.Lock()
	st := ConnectorStatus{
		Name: cs.name, State: cs.state, Since: cs.since, OwnerID: cs.ownerID,
		EventHub: cs.eventHub, ConsumerGroup: cs.consumerGroup, SinkType: cs.sinkType,
		Source: cs.source, Sink: cs.sink, Store: cs.store, LastError: cs.lastErr, Partitions: []PartitionStatus{},
		DeadLetters: cs.letters,
	}
	runner := cs.runner
	props := make(map[string]azeventhubs.PartitionProperties, len(cs.props))
	for k, v := range cs.props {
		props[k] = v
	}
	cs.mu.Unlock()
	if runner == nil {
		return st
	}
	now := cs.now()
	for _, ps := range runner.snapshot() {
		st.Partitions = append(st.Partitions, ps.status(props[ps.id], now))
	}
	slices.SortFunc(st.Partitions, func(a, b PartitionStatus) int {
		ai, aerr := strconv.Atoi(a.ID)
		bi, berr := strconv.Atoi(b.ID)
		if aerr == nil && berr == nil {
			return ai - bi
		}
		return strings.Compare(a.ID, b.ID)
	})
	return st
}

// partitionSnapshot is a copy of a partition run's counters.
type partitionSnapshot struct {
	id         string
	watermark  *int64
	checkpoint *int64
	received   *int64    // highest sequence number received
	enqueued   time.Time // enqueued time of the last committed event
	committed  int64
	lastCommit time.Time
	paused     bool
}

func (ps partitionSnapshot) status(props azeventhubs.PartitionProperties, now time.Time) PartitionStatus {
	out := PartitionStatus{ID: ps.id, Watermark: ps.watermark, Checkpoint: ps.checkpoint, Committed: ps.committed, Paused: ps.paused}
	if !ps.lastCommit.IsZero() {
		t := ps.lastCommit
		out.LastCommit = &t
	}
	var last *int64
	known := props.PartitionID != ""
	if known && !props.IsEmpty {
		v := props.LastEnqueuedSequenceNumber
		last = &v
	}
	if ps.received != nil && (last == nil || *ps.received > *last) {
		v := *ps.received
		last = &v
	}
	out.LastEnqueued = last
	switch {
	case last == nil && known:
		lag := int64(0) // an empty partition
		out.Lag = &lag
	case last == nil:
	case ps.watermark != nil:
		lag := max(*last-*ps.watermark, 0)
		out.Lag = &lag
	case known:
		lag := max(*last-(props.BeginningSequenceNumber-1), 0)
		out.Lag = &lag
	}
	if out.Lag != nil && *out.Lag > 0 && !ps.enqueued.IsZero() {
		out.LagSeconds = max(now.Sub(ps.enqueued).Seconds(), 0)
	}
	return out
}

// propsReader reads a partition's properties ([source.Source]).
type propsReader interface {
	PartitionProperties(ctx context.Context, id string) (azeventhubs.PartitionProperties, error)
}

// refreshProps reads the properties of the partitions the runner drives,
// each every interval (and a newly owned one within a second; each call
// bounded by every), until ctx ends, so that lag counts events not
// received yet.
func (cs *connState) refreshProps(ctx context.Context, src propsReader, r *Runner, every time.Duration) {
	t := time.NewTicker(min(every, time.Second))
	defer t.Stop()
	readAt := map[string]time.Time{}
	for {
		now := cs.now()
		parts := r.snapshot()
		probing := len(parts) == 0 && !cs.sourceDownSince().IsZero()
		if probing {
			// Claims are held while the source is not reached
			// (sourceOptions): with no partition to read, a call on the
			// hub's first partition tells when it answers again.
			parts = []partitionSnapshot{{id: "0"}}
		}
		for _, ps := range parts {
			if at, ok := readAt[ps.id]; ok && now.Sub(at) < every {
				continue
			}
			// A call that does not answer before the next one is due is a
			// failure of the source: over a half-open connection it would
			// otherwise wait for the AMQP idle timeout (60s) while
			// readiness stays green.
			cctx, cancel := context.WithTimeout(ctx, every)
			p, err := src.PartitionProperties(cctx, ps.id)
			cancel()
			if err != nil {
				if ctx.Err() == nil {
					cs.sourceReached(fmt.Errorf("partition %s properties: %w", ps.id, err))
				}
				break
			}
			readAt[ps.id] = now
			if !probing {
				cs.setProps(p)
			}
			cs.sourceReached(nil)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// gate is a connector's pause switch, shared by its partitions across
// restarts.
type gate struct {
	mu      sync.Mutex // guards the fields below
	paused  bool
	changed chan struct{} // closed and replaced at each change
}

func newGate() *gate { return &gate{changed: make(chan struct{})} }

func (g *gate) set(paused bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.paused != paused {
		g.paused = paused
		close(g.changed)
		g.changed = make(chan struct{})
	}
}

func (g *gate) isPaused() bool {
	p, _ := g.state()
	return p
}

// state returns whether the gate is closed and a channel closed at its
// next change.
func (g *gate) state() (bool, <-chan struct{}) {
	if g == nil {
		return false, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.paused, g.changed
}

// lagInterval is how often partition properties are read for the lag.
func (c *Config) lagInterval() time.Duration {
	if c.HTTP != nil && c.HTTP.LagInterval > 0 {
		return c.HTTP.LagInterval
	}
	return defaultLagInterval
}
