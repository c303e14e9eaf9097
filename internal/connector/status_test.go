package connector

import (
	"errors"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
)

func TestPartitionLag(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	i := func(v int64) *int64 { return &v }
	props := func(begin, last int64, empty bool) azeventhubs.PartitionProperties {
		return azeventhubs.PartitionProperties{PartitionID: "0", BeginningSequenceNumber: begin, LastEnqueuedSequenceNumber: last, IsEmpty: empty}
	}
	for _, tc := range []struct {
		name     string
		snap     partitionSnapshot
		props    azeventhubs.PartitionProperties
		lag      *int64
		last     *int64
		lagAfter float64
	}{
		{name: "nothing known", snap: partitionSnapshot{id: "0"}},
		{name: "empty partition", snap: partitionSnapshot{id: "0"}, props: props(0, -1, true), lag: i(0)},
		{name: "nothing committed: the retained events", snap: partitionSnapshot{id: "0"}, props: props(10, 19, false), lag: i(10), last: i(19)},
		{name: "caught up", snap: partitionSnapshot{id: "0", watermark: i(19), enqueued: now.Add(-time.Hour)}, props: props(0, 19, false), lag: i(0), last: i(19)},
		{name: "behind: lag in time from the last committed event",
			snap:  partitionSnapshot{id: "0", watermark: i(15), enqueued: now.Add(-90 * time.Second)},
			props: props(0, 19, false), lag: i(4), last: i(19), lagAfter: 90},
		{name: "a received event newer than the properties",
			snap:  partitionSnapshot{id: "0", watermark: i(15), received: i(25)},
			props: props(0, 19, false), lag: i(10), last: i(25)},
		{name: "received only, no properties yet", snap: partitionSnapshot{id: "0", watermark: i(3), received: i(7)}, lag: i(4), last: i(7)},
		{name: "watermark ahead of stale properties", snap: partitionSnapshot{id: "0", watermark: i(30)}, props: props(0, 19, false), lag: i(0), last: i(19)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.snap.status(tc.props, now)
			if !eqPtr(got.Lag, tc.lag) || !eqPtr(got.LastEnqueued, tc.last) || got.LagSeconds != tc.lagAfter {
				t.Errorf("lag %v, last %v, lag seconds %v; want %v, %v, %v", deref(got.Lag), deref(got.LastEnqueued), got.LagSeconds, deref(tc.lag), deref(tc.last), tc.lagAfter)
			}
		})
	}
}

func eqPtr(a, b *int64) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

func TestNotReady(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ok := Reach{OK: true, At: at}
	for _, tc := range []struct {
		name string
		st   ConnectorStatus
		want string
	}{
		{"running", ConnectorStatus{State: StateRunning, Source: ok, Sink: ok}, ""},
		{"paused", ConnectorStatus{State: StatePaused, Source: ok, Sink: ok}, ""},
		{"starting", ConnectorStatus{State: StateStarting, Source: ok}, "starting; sink not tried yet"},
		{"sink down", ConnectorStatus{State: StateRunning, Source: ok, Sink: Reach{Error: "dial tcp: connection refused", At: at}}, "sink not reached: dial tcp: connection refused"},
		// The source is dialled only once the sink answered: with the sink
		// down at start, only the sink failed.
		{"sink down at start", ConnectorStatus{State: StateSinkUnavailable, Sink: Reach{Error: "dial tcp: connection refused", At: at}},
			"sink_unavailable; source not tried yet; sink not reached: dial tcp: connection refused"},
		{"source down", ConnectorStatus{State: StateStarting, Source: Reach{Error: "amqp: link detached", At: at}, Sink: ok},
			"starting; source not reached: amqp: link detached"},
		{"store down", ConnectorStatus{State: StateRunning, Source: ok, Sink: ok, Store: &Reach{Error: "context deadline exceeded"}}, "checkpoint store not reached: context deadline exceeded"},
		{"store reached", ConnectorStatus{State: StateRunning, Source: ok, Sink: ok, Store: &ok}, ""},
		{"failed", ConnectorStatus{State: StateFailed, Source: ok, Sink: ok, LastError: &TimedError{Message: "boom"}}, "failed: boom"},
	} {
		if got := tc.st.NotReady(); got != tc.want {
			t.Errorf("%s: NotReady() = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestControlStates(t *testing.T) {
	c := NewControl()
	cs := c.add("a", nil)
	if err := c.Resume("a"); !errors.Is(err, ErrConnectorState) {
		t.Errorf("resume of a connector that is not paused: %v, want ErrConnectorState", err)
	}
	if err := c.Pause("a"); err != nil {
		t.Fatal(err)
	}
	cs.started(nil, "owner") // a connector paused while starting is paused once it runs
	if st, _ := c.Status("a"); st.State != StatePaused || st.OwnerID != "owner" {
		t.Errorf("state %s owner %q, want paused, owner", st.State, st.OwnerID)
	}
	if err := c.Resume("a"); err != nil {
		t.Fatal(err)
	}
	if st, _ := c.Status("a"); st.State != StateRunning {
		t.Errorf("state %s after resume, want running", st.State)
	}
	cs.failed(errors.New("boom"))
	for name, call := range map[string]func(string) error{"pause": c.Pause, "restart": c.Restart} {
		if err := call("a"); !errors.Is(err, ErrConnectorState) {
			t.Errorf("%s of a failed connector: %v, want ErrConnectorState", name, err)
		}
	}
	if _, err := c.Status("b"); !errors.Is(err, ErrUnknownConnector) {
		t.Errorf("status of an unknown connector: %v", err)
	}
}
