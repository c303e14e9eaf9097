package source

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ehsink/ehsink/sinks"
)

func TestParseStart(t *testing.T) {
	ts := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want string
	}{
		{"", "earliest"},
		{"earliest", "earliest"},
		{"EARLIEST", "earliest"},
		{"latest", "latest"},
		{"seq:0", "seq>=0"},
		{"seq:42", "seq>=42"},
		{"2024-05-01T12:00:00Z", "time>=" + ts.Format(time.RFC3339)},
		{"2024-05-01T14:00:00+02:00", "time>=" + ts.Format(time.RFC3339)},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			p, err := parseStart(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			var got string
			switch {
			case p.Earliest != nil && *p.Earliest:
				got = "earliest"
			case p.Latest != nil && *p.Latest:
				got = "latest"
			case p.SequenceNumber != nil && p.Inclusive:
				got = "seq>=" + itoa(*p.SequenceNumber)
			case p.EnqueuedTime != nil && p.Inclusive:
				got = "time>=" + p.EnqueuedTime.UTC().Format(time.RFC3339)
			}
			if got != tt.want {
				t.Errorf("ParseStart(%q) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
	for _, bad := range []string{"first", "seq:", "seq:-1", "seq:x", "2024-05-01", "12:00"} {
		if _, err := parseStart(bad); err == nil {
			t.Errorf("ParseStart(%q) succeeded, want an error", bad)
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestCheckResume(t *testing.T) {
	full := partitionRange{Begin: 100, Last: 199}
	tests := []struct {
		name    string
		pos     int64
		r       partitionRange
		policy  policy
		want    int64 // resume-after sequence number when no error
		problem bool
		fail    string // substring of the error, "" for none
	}{
		{"inside", 150, full, policyFail, 150, false, ""},
		{"at last", 199, full, policyFail, 199, false, ""},
		{"just before begin", 99, full, policyFail, 99, false, ""},
		{"past end fails", 500, full, policyFail, 0, true, "past the last event"},
		{"past end earliest", 500, full, policyEarliest, 99, true, ""},
		{"past end latest", 500, full, policyLatest, 199, true, ""},
		{"expired fails", 10, full, policyFail, 0, true, "events 11 to 99 expired"},
		{"expired earliest", 10, full, policyEarliest, 99, true, ""},
		{"expired latest", 10, full, policyLatest, 199, true, ""},
		{"empty new partition", 5, partitionRange{Begin: 0, Last: -1, Empty: true}, policyFail, 0, true, "past the last event"},
		{"empty partition earliest", 5, partitionRange{Begin: 0, Last: -1, Empty: true}, policyEarliest, -1, true, ""},
		{"all expired, caught up", 199, partitionRange{Begin: 200, Last: 199, Empty: true}, policyFail, 199, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, problem, err := checkResume("3", sinks.Position{SequenceNumber: tt.pos}, tt.r, tt.policy)
			if tt.fail != "" {
				if !errors.Is(err, ErrInvalidCheckpoint) || !strings.Contains(err.Error(), tt.fail) ||
					!strings.Contains(err.Error(), "partition 3") || !strings.Contains(err.Error(), "on_invalid_checkpoint") {
					t.Fatalf("err = %v, want ErrInvalidCheckpoint saying %q, the partition and the fix", err, tt.fail)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.SequenceNumber != tt.want || (problem != "") != tt.problem {
				t.Errorf("got seq %d problem %q, want seq %d problem=%v", got.SequenceNumber, problem, tt.want, tt.problem)
			}
		})
	}
}

func TestOptionsValidate(t *testing.T) {
	base := Options{Connection: "Endpoint=sb://x/;SharedAccessKeyName=a;SharedAccessKey=b", EventHub: "orders", Store: nopStore{}}
	if err := base.Validate(); err != nil {
		t.Fatalf("valid options: %v", err)
	}
	tests := []struct {
		name string
		mod  func(*Options)
		want string
	}{
		{"no connection", func(o *Options) { o.Connection = "" }, "connection or namespace"},
		{"namespace without credential", func(o *Options) { o.Connection = ""; o.Namespace = "x.servicebus.windows.net" }, "credential"},
		{"bad start", func(o *Options) { o.Start = "soon" }, "start:"},
		{"bad partition start", func(o *Options) { o.StartPartitions = map[string]string{"2": "seq:x"} }, "start_partitions.2:"},
		{"bad policy", func(o *Options) { o.OnInvalidCheckpoint = "skip" }, "on_invalid_checkpoint"},
		{"bad strategy", func(o *Options) { o.LoadBalancing.Strategy = "fair" }, "load_balancing.strategy:"},
		{"prefetch over the SDK limit", func(o *Options) { o.Prefetch = 9000 }, "prefetch: 9000 exceeds 5000"},
		{"expiration too short", func(o *Options) {
			o.LoadBalancing.UpdateInterval = 10 * time.Second
			o.LoadBalancing.OwnershipExpiration = 15 * time.Second
		}, "load_balancing.ownership_expiration: 15s is less than twice update_interval"},
		{"max wait too long", func(o *Options) { o.Batch.MaxWait = 2 * time.Minute }, "max_wait"},
		{"min events above max events", func(o *Options) { o.Batch.MinEvents = 2001 }, "batch.min_events: 2001 exceeds batch.max_events (2000)"},
		{"negative min events", func(o *Options) { o.Batch.MinEvents = -1 }, "batch.min_events: must be positive"},
		{"min wait above max wait", func(o *Options) { o.Batch.MinWait = 2 * time.Second }, "batch.min_wait: 2s exceeds batch.max_wait (1s)"},
		{"negative min wait", func(o *Options) { o.Batch.MinWait = -time.Second }, "batch.min_wait: must be positive"},
		{"no store", func(o *Options) { o.Store = nil }, "checkpoint store"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := base
			tt.mod(&o)
			err := o.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestCheckWatermark(t *testing.T) {
	r := partitionRange{Begin: 0, Last: 9}
	tests := []struct {
		name    string
		wm      *sinks.Position
		wantErr bool
	}{
		{"no watermark", nil, false},
		{"inside the partition", &sinks.Position{SequenceNumber: 5}, false},
		{"at the last event", &sinks.Position{SequenceNumber: 9}, false},
		{"past the end: the hub was recreated", &sinks.Position{SequenceNumber: 500}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkWatermark("3", tt.wm, r)
			if (err != nil) != tt.wantErr {
				t.Fatalf("checkWatermark = %v, want error %v", err, tt.wantErr)
			}
			if err != nil && (!errors.Is(err, ErrInvalidCheckpoint) || !strings.Contains(err.Error(), "partition 3") || !strings.Contains(err.Error(), "500")) {
				t.Fatalf("error %q does not name the partition, the watermark and ErrInvalidCheckpoint", err)
			}
		})
	}
	if err := checkWatermark("0", &sinks.Position{SequenceNumber: 0}, partitionRange{Begin: 0, Last: -1, Empty: true}); err == nil {
		t.Fatal("a sink holding seq 0 of an empty partition must be refused")
	}
}
