package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/internal/connector"
	"github.com/ehsink/ehsink/internal/connstr"
)

const checkpointsUsage = `Usage: ehsink checkpoints list  -c connectors.yaml [--connector NAME] [--connection CS]
       ehsink checkpoints reset -c connectors.yaml [--connector NAME] [--connection CS]
                                --to earliest|latest|RFC3339-TIME [--partition ID]... --yes [--force]

list shows, per partition of the connector's event hub and consumer group:
the checkpoint (sequence number and offset), the owner of the partition and
the age of its lease, a status, the last enqueued sequence number and the lag
(events after the checkpoint). The status is ok or one of:

  AHEAD    the checkpoint is past the partition's last event (the event hub
           was recreated, or the checkpoint is another hub's); lag is "?"
  EXPIRED  events after the checkpoint were dropped by retention before they
           were read (how many is said on stderr)
  STALLED  a live lease, events waiting, and neither the checkpoint nor the
           oldest waiting event younger than --stalled-after: the owner
           renews its lease but does not move the partition

Each flagged partition is explained on stderr; the exit status stays 0.
--stalled-after defaults to twice the longer of the ownership expiration
and checkpoint.every_interval; raise it for a sink that commits less often
(a Parquet max_age).

reset moves checkpoints (all partitions, or those given with --partition) to
the earliest event, after the latest event, or to the first event enqueued at
or after a time. It changes nothing without --yes, and refuses partitions
whose ownership lease has not expired (a replica is reading them: stop it
first) unless --force. A sink that keeps its own watermark still skips what
it already holds: the resume position is the later of the two.

The checkpoint store is the connector's (checkpoint: in the file). The event
hub is the connector's source; --connection overrides it, which is needed
for a connector on the in-process emulator unless emulator.listen is a fixed
address.

Exit status: 0 ok, 1 failed, 2 bad usage.
`

// runCheckpoints is `ehsink checkpoints`.
func runCheckpoints(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, verb, code, ok := actionFlagSet(ctx, "checkpoints", checkpointsUsage, []string{"list", "reset"}, args, stdout, stderr)
	if !ok {
		return code
	}
	var (
		configPath = fs.String("c", "", "connectors.yaml `FILE` (required)")
		name       = fs.String("connector", "", "connector `NAME` (optional when the file has one)")
		conn       = fs.String("connection", "", "Event Hubs connection `STRING` overriding the connector's source")
		to         = fs.String("to", "", "reset: earliest, latest or an RFC 3339 time")
		yes        = fs.Bool("yes", false, "reset: really write the checkpoints")
		force      = fs.Bool("force", false, "reset: also reset partitions with a live ownership lease")
		stalled    = fs.Duration("stalled-after", 0, "list: flag a live lease whose checkpoint and oldest waiting event are older than `DURATION`")
		parts      stringList
	)
	fs.Var(&parts, "partition", "reset: only partition `ID` (repeatable)")
	if code, ok := fs.parse(args[1:], stdout, stderr); !ok {
		return code
	}
	usage := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "ehsink checkpoints %s: "+format+"\n", append([]any{verb}, a...)...)
		return exitUsage
	}
	switch {
	case *configPath == "":
		return usage("-c connectors.yaml is required")
	case verb == "list" && (*to != "" || *yes || *force || len(parts) > 0):
		return usage("--to, --yes, --force and --partition go with reset")
	case verb == "reset" && *stalled != 0:
		return usage("--stalled-after goes with list")
	case *stalled < 0:
		return usage("--stalled-after must be positive")
	}
	var target resetTarget
	if verb == "reset" {
		var err error
		if target, err = parseResetTarget(*to); err != nil {
			return usage("--to: %v", err)
		}
	}

	cfg, spec, code, ok := loadConnector(*configPath, *name, stderr, usage)
	if !ok {
		return code
	}
	cs, err := newCheckpointSession(ctx, cfg, spec, *conn)
	if err != nil {
		fmt.Fprintf(stderr, "ehsink checkpoints: connector %q: %v\n", spec.Name, err)
		return exitFailure
	}
	defer cs.close(context.WithoutCancel(ctx))

	rows, err := cs.rows(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "ehsink checkpoints: connector %q: %v\n", spec.Name, err)
		return exitFailure
	}
	if verb == "list" {
		cs.stalledAfter = *stalled
		if cs.stalledAfter == 0 {
			cs.stalledAfter = 2 * max(cs.expiration, spec.Checkpoint.EveryInterval)
		}
		cs.list(ctx, spec.Name, rows, stdout, stderr)
		return exitOK
	}
	return cs.reset(ctx, rows, target, parts, *yes, *force, stdout, stderr)
}

// list prints rows as a table on stdout, with a line on stderr for each
// partition that needs a look and for what could not be read.
func (cs *checkpointSession) list(ctx context.Context, connector string, rows []partitionRow, stdout, stderr io.Writer) {
	notes := cs.assess(ctx, rows, time.Now())
	cs.print(stdout, rows)
	for _, r := range rows {
		if r.health.note != "" {
			fmt.Fprintf(stderr, "ehsink checkpoints: connector %q partition %s: %s: %s\n", connector, r.id, r.health.status, r.health.note)
		}
	}
	if notes != nil {
		fmt.Fprintf(stderr, "ehsink checkpoints: connector %q: checkpoint times not read, STALLED not judged: %v\n", connector, notes)
	}
	if cs.hubErr != nil {
		fmt.Fprintf(stderr, "ehsink checkpoints: connector %q: event hub not reachable, no lag shown: %v\n", connector, cs.hubErr)
	}
}

// loadConnector loads the config at path and picks the connector name (or
// the only one); on a problem it reports it and returns the exit code.
func loadConnector(path, name string, stderr io.Writer, usage func(string, ...any) int) (*connector.Config, *connector.Spec, int, bool) {
	cfg, err := connector.Load(path, connector.LoadOptions{})
	if err != nil {
		fmt.Fprintf(stderr, "ehsink checkpoints: %v\n", err)
		return nil, nil, exitUsage, false
	}
	spec, err := pickConnector(cfg, name)
	if err != nil {
		return nil, nil, usage("%v", err), false
	}
	return cfg, spec, 0, true
}

// checkpointSession is what the checkpoints command works with: the
// connector's store and, when reachable, its event hub.
type checkpointSession struct {
	spec       *connector.Spec
	store      azeventhubs.CheckpointStore
	ns         string // namespace as the store names it
	hub, group string
	expiration time.Duration
	client     *azeventhubs.ConsumerClient // nil when the hub is not reachable
	hubErr     error                       // why client is nil
	// stalledAfter is how old a live owner's checkpoint and oldest waiting
	// event may both be before list flags the partition STALLED.
	stalledAfter time.Duration
}

func newCheckpointSession(ctx context.Context, cfg *connector.Config, spec *connector.Spec, connOverride string) (*checkpointSession, error) {
	cs := &checkpointSession{spec: spec, hub: spec.Source.EventHub, group: spec.Source.ConsumerGroup,
		expiration: spec.Source.LoadBalancing.OwnershipExpiration}
	if cs.group == "" {
		cs.group = azeventhubs.DefaultConsumerGroup
	}
	var ep endpoint
	t := target{connection: connOverride}
	viaEmulator := spec.Source.Connection.Reveal() == "emulator"
	switch {
	case connOverride != "":
		var err error
		if ep, _, err = t.resolve(); err != nil {
			return nil, err
		}
	case viaEmulator:
		c, err := emulatorConnection(cfg, spec)
		if err != nil {
			cs.hubErr = err
		} else {
			ep = endpoint{conn: c, hub: spec.Source.EventHub}
		}
	case spec.Source.Connection != "":
		t.connection = spec.Source.Connection.Reveal()
		t.eventhub = spec.Source.EventHub
		var err error
		if ep, _, err = t.resolve(); err != nil {
			return nil, fmt.Errorf("source.connection: %w", err)
		}
	default:
		ep = endpoint{namespace: spec.Source.Namespace, hub: spec.Source.EventHub}
	}
	if ep.hub != "" {
		cs.hub = ep.hub
	}
	if connOverride == "" {
		ep.customEndpoint = spec.Source.CustomEndpoint
	}
	switch {
	case viaEmulator:
		cs.ns = connector.EmulatorNamespace
	case ep.conn != "":
		props, err := connstr.EventHubs(ep.conn.Reveal())
		if err != nil {
			return nil, fmt.Errorf("connection string: %w", err)
		}
		cs.ns = props.FullyQualifiedNamespace
	default:
		cs.ns = spec.Source.Namespace
	}
	if cs.hub == "" {
		return nil, errors.New("no event hub: set source.eventhub or an EntityPath")
	}

	store, err := connector.NewCheckpointStore(ctx, spec.Checkpoint, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("checkpoint store: %w", err)
	}
	cs.store = store

	if cs.hubErr == nil {
		cs.client, cs.hubErr = ep.consumer(cs.group)
	}
	return cs, nil
}

// consumer returns a consumer client for ep that does not retry: a command
// line tool says what is wrong rather than wait.
func (ep endpoint) consumer(group string) (*azeventhubs.ConsumerClient, error) {
	opts := &azeventhubs.ConsumerClientOptions{RetryOptions: azeventhubs.RetryOptions{MaxRetries: -1}, CustomEndpoint: ep.customEndpoint}
	if ep.conn != "" {
		hub := ep.hub
		if props, err := connstr.EventHubs(ep.conn.Reveal()); err == nil && props.EntityPath != nil && *props.EntityPath != "" {
			hub = ""
		}
		return azeventhubs.NewConsumerClientFromConnectionString(ep.conn.Reveal(), hub, group, opts)
	}
	cred, err := azidentity.NewDefaultAzureCredential(nil)
	if err != nil {
		return nil, fmt.Errorf("credential: %w", err)
	}
	return azeventhubs.NewConsumerClient(ep.namespace, ep.hub, group, cred, opts)
}

func (cs *checkpointSession) close(ctx context.Context) {
	if cs.client != nil {
		_ = cs.client.Close(ctx)
	}
}

// partitionRow is one line of `checkpoints list`.
type partitionRow struct {
	id         string
	checkpoint *azeventhubs.Checkpoint
	owner      *azeventhubs.Ownership
	props      *azeventhubs.PartitionProperties
	health     health // set by assess
}

// owned reports whether the partition's lease is live.
func (r partitionRow) owned(expiration time.Duration, now time.Time) bool {
	return r.owner != nil && r.owner.OwnerID != "" && now.Sub(r.owner.LastModifiedTime) < expiration
}

// rows gathers the store's state and, when the hub is reachable, the
// partitions' properties.
func (cs *checkpointSession) rows(ctx context.Context) ([]partitionRow, error) {
	cps, err := cs.store.ListCheckpoints(ctx, cs.ns, cs.hub, cs.group, nil)
	if err != nil {
		return nil, fmt.Errorf("listing checkpoints: %w", err)
	}
	owns, err := cs.store.ListOwnership(ctx, cs.ns, cs.hub, cs.group, nil)
	if err != nil {
		return nil, fmt.Errorf("listing ownership: %w", err)
	}
	byID := map[string]*partitionRow{}
	row := func(id string) *partitionRow {
		if byID[id] == nil {
			byID[id] = &partitionRow{id: id}
		}
		return byID[id]
	}
	for i := range cps {
		row(cps[i].PartitionID).checkpoint = &cps[i]
	}
	for i := range owns {
		row(owns[i].PartitionID).owner = &owns[i]
	}
	if cs.client != nil {
		hp, err := cs.client.GetEventHubProperties(ctx, nil)
		if err != nil {
			cs.hubErr = err
		} else {
			for _, id := range hp.PartitionIDs {
				pp, err := cs.client.GetPartitionProperties(ctx, id, nil)
				if err != nil {
					cs.hubErr = err
					break
				}
				row(id).props = &pp
			}
		}
	}
	out := make([]partitionRow, 0, len(byID))
	for _, r := range byID {
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b partitionRow) int {
		ai, aerr := strconv.Atoi(a.id)
		bi, berr := strconv.Atoi(b.id)
		if aerr == nil && berr == nil {
			return ai - bi
		}
		return strings.Compare(a.id, b.id)
	})
	return out, nil
}

func (cs *checkpointSession) print(w io.Writer, rows []partitionRow) {
	fmt.Fprintf(w, "connector %s: event hub %s, consumer group %s, namespace %s\n", cs.spec.Name, cs.hub, cs.group, cs.ns)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tCHECKPOINT SEQ\tOFFSET\tOWNER\tLEASE\tSTATUS\tLAST ENQUEUED SEQ\tLAG")
	now := time.Now()
	for _, r := range rows {
		seq, off := "-", "-"
		if r.checkpoint != nil {
			if r.checkpoint.SequenceNumber != nil {
				seq = strconv.FormatInt(*r.checkpoint.SequenceNumber, 10)
			}
			if r.checkpoint.Offset != nil {
				off = *r.checkpoint.Offset
			}
		}
		owner, lease := "-", "-"
		if r.owner != nil {
			owner = r.owner.OwnerID
			if owner == "" {
				owner, lease = "(released)", "-"
			} else if r.owned(cs.expiration, now) {
				lease = "live, renewed " + now.Sub(r.owner.LastModifiedTime).Round(time.Second).String() + " ago"
			} else {
				lease = "expired"
			}
		}
		last, lag := "-", "-"
		if r.props != nil {
			last = strconv.FormatInt(r.props.LastEnqueuedSequenceNumber, 10)
			if r.props.IsEmpty {
				last = "(empty)"
			}
			lag = strconv.FormatInt(lagOf(r), 10)
			if r.health.status == statusAhead {
				lag = "?"
			}
		}
		status := r.health.status
		if status == "" {
			status = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.id, seq, off, owner, lease, status, last, lag)
	}
	tw.Flush()
}

// lagOf is the number of retained events after the checkpoint (all of them
// without one).
func lagOf(r partitionRow) int64 {
	p := r.props
	if p.IsEmpty || p.LastEnqueuedSequenceNumber < p.BeginningSequenceNumber {
		return 0
	}
	after := p.BeginningSequenceNumber - 1
	if r.checkpoint != nil && r.checkpoint.SequenceNumber != nil && *r.checkpoint.SequenceNumber > after {
		after = *r.checkpoint.SequenceNumber
	}
	return max(p.LastEnqueuedSequenceNumber-after, 0)
}

// resetTarget is where reset moves checkpoints.
type resetTarget struct {
	kind string // earliest, latest, time
	at   time.Time
}

func (t resetTarget) String() string {
	if t.kind == "time" {
		return t.at.Format(time.RFC3339Nano)
	}
	return t.kind
}

func parseResetTarget(s string) (resetTarget, error) {
	switch strings.ToLower(s) {
	case "":
		return resetTarget{}, errors.New("required: earliest, latest or an RFC 3339 time")
	case "earliest", "latest":
		return resetTarget{kind: strings.ToLower(s)}, nil
	}
	at, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return resetTarget{}, fmt.Errorf("%q is not earliest, latest or an RFC 3339 time (2024-05-01T12:00:00Z)", s)
	}
	return resetTarget{kind: "time", at: at}, nil
}

// probeWait bounds reading the event at a reset time: on a partition with
// no event at or after it, nothing arrives and the checkpoint goes to latest.
const probeWait = 3 * time.Second

func (cs *checkpointSession) reset(ctx context.Context, rows []partitionRow, t resetTarget, only []string, yes, force bool, stdout, stderr io.Writer) int {
	if cs.client == nil || cs.hubErr != nil {
		fmt.Fprintf(stderr, "ehsink checkpoints reset: connector %q: reset needs the event hub: %v\n", cs.spec.Name, cs.hubErr)
		return exitFailure
	}
	var selected []partitionRow
	for _, r := range rows {
		if r.props != nil && (len(only) == 0 || slices.Contains(only, r.id)) {
			selected = append(selected, r)
		}
	}
	for _, id := range only {
		if !slices.ContainsFunc(selected, func(r partitionRow) bool { return r.id == id }) {
			fmt.Fprintf(stderr, "ehsink checkpoints reset: event hub %q has no partition %q\n", cs.hub, id)
			return exitUsage
		}
	}
	now := time.Now()
	var refused []string
	for _, r := range selected {
		if r.owned(cs.expiration, now) {
			refused = append(refused, fmt.Sprintf("partition %s is owned by %s (lease renewed %s ago)", r.id, r.owner.OwnerID, now.Sub(r.owner.LastModifiedTime).Round(time.Second)))
		}
	}
	if len(refused) > 0 && !force {
		fmt.Fprintf(stderr, "ehsink checkpoints reset: connector %q: refused, a replica is running:\n  %s\nStop the connector (or wait %s for the leases to expire), or pass --force.\n",
			cs.spec.Name, strings.Join(refused, "\n  "), cs.expiration)
		return exitFailure
	}
	type planned struct {
		row partitionRow
		cp  azeventhubs.Checkpoint
	}
	var plan []planned
	for _, r := range selected {
		seq, off, err := cs.position(ctx, r, t)
		if err != nil {
			fmt.Fprintf(stderr, "ehsink checkpoints reset: event hub %q partition %s: %v\n", cs.hub, r.id, err)
			return exitFailure
		}
		plan = append(plan, planned{r, azeventhubs.Checkpoint{FullyQualifiedNamespace: cs.ns, EventHubName: cs.hub, ConsumerGroup: cs.group,
			PartitionID: r.id, SequenceNumber: &seq, Offset: &off}})
	}
	verbTense := "would move"
	if yes {
		verbTense = "moved"
	}
	for _, p := range plan {
		from := "none"
		if p.row.checkpoint != nil && p.row.checkpoint.SequenceNumber != nil {
			from = "seq " + strconv.FormatInt(*p.row.checkpoint.SequenceNumber, 10)
		}
		if yes {
			if err := cs.store.SetCheckpoint(ctx, p.cp, nil); err != nil {
				fmt.Fprintf(stderr, "ehsink checkpoints reset: partition %s: %v\n", p.row.id, err)
				return exitFailure
			}
		}
		fmt.Fprintf(stdout, "partition %s: %s checkpoint from %s to seq %d offset %s (%s)\n", p.row.id, verbTense, from, *p.cp.SequenceNumber, *p.cp.Offset, t)
	}
	if !yes {
		fmt.Fprintln(stderr, "ehsink checkpoints reset: nothing written; run again with --yes to move the checkpoints")
		return exitFailure
	}
	return exitOK
}

// position returns the checkpoint (last processed event) that makes the
// partition resume at t.
func (cs *checkpointSession) position(ctx context.Context, r partitionRow, t resetTarget) (int64, string, error) {
	p := r.props
	earliestSeq, earliestOff := p.BeginningSequenceNumber-1, "-1"
	switch {
	case t.kind == "earliest" || p.IsEmpty:
		return earliestSeq, earliestOff, nil
	case t.kind == "latest":
		return p.LastEnqueuedSequenceNumber, p.LastEnqueuedOffset, nil
	}
	// the first event enqueued at or after t, then the one before it (whose
	// offset the checkpoint needs)
	first, err := cs.readOne(ctx, r.id, azeventhubs.StartPosition{EnqueuedTime: &t.at, Inclusive: true})
	if err != nil {
		return 0, "", err
	}
	if first == nil {
		return p.LastEnqueuedSequenceNumber, p.LastEnqueuedOffset, nil
	}
	if first.SequenceNumber <= p.BeginningSequenceNumber {
		return earliestSeq, earliestOff, nil
	}
	prevSeq := first.SequenceNumber - 1
	prev, err := cs.readOne(ctx, r.id, azeventhubs.StartPosition{SequenceNumber: &prevSeq, Inclusive: true})
	if err != nil {
		return 0, "", err
	}
	if prev == nil || prev.SequenceNumber != prevSeq {
		return 0, "", fmt.Errorf("cannot read the event before sequence number %d", first.SequenceNumber)
	}
	return prev.SequenceNumber, prev.Offset, nil
}

// readOne reads one event from start with a receiver that has no owner
// level, so it never takes the partition from a replica; nil when none
// arrives within probeWait.
func (cs *checkpointSession) readOne(ctx context.Context, id string, start azeventhubs.StartPosition) (*azeventhubs.ReceivedEventData, error) {
	pc, err := cs.client.NewPartitionClient(id, &azeventhubs.PartitionClientOptions{StartPosition: start, Prefetch: -1})
	if err != nil {
		return nil, err
	}
	defer pc.Close(context.WithoutCancel(ctx))
	rctx, cancel := context.WithTimeout(ctx, probeWait)
	defer cancel()
	evs, err := pc.ReceiveEvents(rctx, 1, nil)
	switch {
	case err == nil && len(evs) > 0:
		return evs[0], nil
	case rctx.Err() != nil && ctx.Err() == nil:
		return nil, nil
	case err == nil:
		return nil, nil
	}
	return nil, fmt.Errorf("reading the partition: %w", err)
}
