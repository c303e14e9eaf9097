package source

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/sinks"
)

// parseStart parses a start position: "earliest", "latest", an RFC 3339
// time (the first event enqueued at or after it) or "seq:N" (the event with
// sequence number N and those after it). The empty string is earliest.
func parseStart(s string) (azeventhubs.StartPosition, error) {
	yes := true
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "earliest":
		return azeventhubs.StartPosition{Earliest: &yes}, nil
	case "latest":
		return azeventhubs.StartPosition{Latest: &yes}, nil
	}
	if rest, ok := strings.CutPrefix(s, "seq:"); ok {
		n, err := strconv.ParseInt(rest, 10, 64)
		if err != nil || n < 0 {
			return azeventhubs.StartPosition{}, fmt.Errorf("%q: want seq:N with N a sequence number >= 0", s)
		}
		return azeventhubs.StartPosition{SequenceNumber: &n, Inclusive: true}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return azeventhubs.StartPosition{}, fmt.Errorf("%q: want earliest, latest, an RFC 3339 time (2024-05-01T12:00:00Z) or seq:N", s)
	}
	return azeventhubs.StartPosition{EnqueuedTime: &t, Inclusive: true}, nil
}

// policy says what to do with a resume position that no longer exists in
// its partition.
type policy string

// The policies of [Options.OnInvalidCheckpoint].
const (
	// policyFail stops the source with ErrInvalidCheckpoint.
	policyFail policy = "fail"
	// policyEarliest resumes at the first retained event.
	policyEarliest policy = "earliest"
	// policyLatest resumes after the last event.
	policyLatest policy = "latest"
)

// parsePolicy parses fail, earliest or latest; the empty string is fail.
func parsePolicy(s string) (policy, error) {
	switch p := policy(strings.ToLower(s)); p {
	case "":
		return policyFail, nil
	case policyFail, policyEarliest, policyLatest:
		return p, nil
	}
	return "", fmt.Errorf("unknown policy %q (want fail, earliest or latest)", s)
}

// partitionRange is what a partition holds, from GetPartitionProperties.
type partitionRange struct {
	// Begin is the sequence number of the first retained event.
	Begin int64
	// Last is the sequence number of the last event; Begin-1 or less when empty.
	Last int64
	// Empty is true when the partition holds no event.
	Empty bool
}

// checkResume checks that resuming after pos (the last processed event) is
// possible in r. It returns pos itself when it is valid, and otherwise the
// replacement the policy asks for (nil for "no position") or an error
// wrapping ErrInvalidCheckpoint that says what was found and what to do.
// The replacement is a position whose next event is the first retained event
// (earliest) or the next event to arrive (latest).
func checkResume(partition string, pos sinks.Position, r partitionRange, policy policy) (sinks.Position, string, error) {
	last := r.Last
	if r.Empty && last < r.Begin-1 {
		last = r.Begin - 1
	}
	var problem string
	switch {
	case pos.SequenceNumber > last:
		problem = fmt.Sprintf("the resume position (sequence number %d) is past the last event of the partition (sequence number %d): the event hub was probably recreated or the emulator wiped",
			pos.SequenceNumber, last)
	case pos.SequenceNumber < r.Begin-1:
		problem = fmt.Sprintf("the resume position (sequence number %d) is before the first retained event (sequence number %d): events %d to %d expired before they were read",
			pos.SequenceNumber, r.Begin, pos.SequenceNumber+1, r.Begin-1)
	default:
		return pos, "", nil
	}
	switch policy {
	case policyEarliest:
		return sinks.Position{SequenceNumber: r.Begin - 1}, problem, nil
	case policyLatest:
		return sinks.Position{SequenceNumber: last}, problem, nil
	}
	return sinks.Position{}, problem, fmt.Errorf("partition %s: %w: %s; set source.on_invalid_checkpoint to earliest or latest to start over (or move the checkpoint with `ehsink checkpoints reset`)",
		partition, ErrInvalidCheckpoint, problem)
}

// checkWatermark refuses to start a partition whose sink already holds
// events past the partition's last one, whatever the policy: the sink's
// state belongs to an earlier incarnation of the event hub, and starting
// over would make the sink drop the new events up to its watermark as
// replays. Only the operator can decide to clear that state.
func checkWatermark(partition string, wm *sinks.Position, r partitionRange) error {
	last := r.Last
	if r.Empty && last < r.Begin-1 {
		last = r.Begin - 1
	}
	if wm == nil || wm.SequenceNumber <= last {
		return nil
	}
	return fmt.Errorf("partition %s: %w: the sink already holds events up to sequence number %d, past the last event of the partition (sequence number %d): the event hub was probably recreated or the emulator wiped. Starting over would make the sink skip the new events up to %d as replays, whatever source.on_invalid_checkpoint says; clear the sink's state for this partition (its watermark) or write to a new destination, then start again",
		partition, ErrInvalidCheckpoint, wm.SequenceNumber, last, wm.SequenceNumber)
}
