package hub

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestUnknownEntities(t *testing.T) {
	n := openNS(t, Config{})
	if _, err := n.Hub("missing"); ConditionOf(err) != CondNotFound || !strings.Contains(err.Error(), "The messaging entity 'missing' could not be found") {
		t.Fatalf("Hub(missing) = %v", err)
	}
	h := mustHub(t, n, "orders")
	if _, err := h.PartitionProperties("4"); ConditionOf(err) != CondArgumentOutOfRange {
		t.Fatalf("PartitionProperties(4) = %v", err)
	}
	if _, err := h.Append("7", nil, [][]byte{[]byte("x")}); ConditionOf(err) != CondArgumentOutOfRange {
		t.Fatalf("Append(7) = %v", err)
	}
	if _, err := h.Append("", ptr(strings.Repeat("k", MaxPartitionKeyLen+1)), [][]byte{[]byte("x")}); ConditionOf(err) != CondInvalidField {
		t.Fatalf("Append(long key) = %v", err)
	}
	if !h.HasConsumerGroup("$Default") || !h.HasConsumerGroup("cg1") || h.HasConsumerGroup("cg2") {
		t.Fatalf("consumer groups %v", h.ConsumerGroups())
	}
	if got := strings.Join(h.PartitionIDs(), ","); got != "0,1,2,3" {
		t.Fatalf("PartitionIDs = %s", got)
	}
}

func TestServerBusy(t *testing.T) {
	clk := newClock()
	n := openNS(t, Config{Now: clk.Now})
	h := mustHub(t, n, "orders")
	n.SetServerBusy(clk.Now().Add(10 * time.Second))
	if _, err := h.Append("0", nil, [][]byte{[]byte("x")}); ConditionOf(err) != CondServerBusy {
		t.Fatalf("Append while busy = %v", err)
	}
	if pp, _ := h.PartitionProperties("0"); !pp.IsEmpty {
		t.Fatalf("a refused append was stored: %+v", pp)
	}
	clk.Advance(10 * time.Second)
	if _, err := h.Append("0", nil, [][]byte{[]byte("x")}); err != nil {
		t.Fatalf("Append after busy window = %v", err)
	}
	n.SetServerBusy(clk.Now().Add(time.Hour))
	n.SetServerBusy(time.Time{})
	if _, err := h.Append("0", nil, [][]byte{[]byte("x")}); err != nil {
		t.Fatalf("Append after reset = %v", err)
	}
}

func TestClosedNamespace(t *testing.T) {
	n, err := Open(Config{DataDir: t.TempDir(), Hubs: []HubConfig{{Name: "orders", Partitions: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	h := mustHub(t, n, "orders")
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	if _, err := h.Append("0", nil, [][]byte{[]byte("x")}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close = %v", err)
	}
	if _, err := h.OpenReceiver(ReceiverOptions{Partition: "0"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("OpenReceiver after Close = %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want []string // substrings of the error; none = valid
	}{
		{"empty", Config{}, nil},
		{"ok", Config{Hubs: []HubConfig{{Name: "a.b-c_d1", Partitions: 32, ConsumerGroups: []string{"$Default", "x"}}}}, nil},
		{"bad", Config{Retention: -1, RetentionBytes: -1, Fsync: 9, Hubs: []HubConfig{
			{Name: "", Partitions: 0},
			{Name: "../x", Partitions: 1},
			{Name: "a", Partitions: 1},
			{Name: "a", Partitions: 2000, ConsumerGroups: []string{"-x"}},
		}}, []string{"hubs[0].name: required", "hubs[0].partitions", "hubs[1].name", "hubs[3].name: duplicate", "hubs[3].partitions", "hubs[3].consumer_groups[0]", "retention:", "retention_bytes:", "fsync:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate = nil")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if _, oerr := Open(tt.cfg); oerr == nil {
				t.Fatal("Open accepted an invalid config")
			}
		})
	}
	for _, s := range []string{"always", "interval", "never"} {
		if p, err := ParseFsyncPolicy(s); err != nil || p.String() != s {
			t.Fatalf("ParseFsyncPolicy(%s) = %v, %v", s, p, err)
		}
	}
	if _, err := ParseFsyncPolicy("sometimes"); err == nil {
		t.Fatal("ParseFsyncPolicy accepted sometimes")
	}
}

// TestBackgroundGoroutine runs the background goroutine with short periods
// while appending; Close must stop it (TestMain checks for leaks) and leave
// every appended event on disk.
func TestBackgroundGoroutine(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{DataDir: dir, Fsync: FsyncInterval, FsyncEvery: time.Millisecond,
		Retention: 24 * time.Hour, RetentionBytes: 1 << 30, RetentionCheckEvery: time.Millisecond,
		Hubs: []HubConfig{{Name: "orders", Partitions: 2}}}
	n, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := mustHub(t, n, "orders")
	for i := 0; i < 2000; i++ {
		if _, err := h.Append("", nil, [][]byte{msg(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n2 := openNS(t, cfg)
	h2 := mustHub(t, n2, "orders")
	for _, id := range h2.PartitionIDs() {
		if pp, _ := h2.PartitionProperties(id); pp.LastEnqueuedSequenceNumber != 999 || pp.BeginSequenceNumber != 0 {
			t.Fatalf("partition %s after reopen: %+v", id, pp)
		}
	}
}
