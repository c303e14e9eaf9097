package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/emulator"
	"github.com/ehsink/ehsink/emulator/emulatortest"
	"github.com/ehsink/ehsink/internal/produce"
)

// startTestEmulator runs an in-process emulator with hub orders.
func startTestEmulator(t *testing.T, partitions int) *emulator.Server {
	t.Helper()
	return emulatortest.Start(t, emulator.Config{Hubs: []emulator.HubConfig{{Name: "orders", Partitions: partitions}}})
}

func callSend(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := runSend(t.Context(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// readAll reads every event of every partition of hub orders.
func readAll(t *testing.T, conn string) map[string][]*azeventhubs.ReceivedEventData {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cc, err := azeventhubs.NewConsumerClientFromConnectionString(conn, "", azeventhubs.DefaultConsumerGroup, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close(ctx)
	hp, err := cc.GetEventHubProperties(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]*azeventhubs.ReceivedEventData{}
	for _, id := range hp.PartitionIDs {
		pp, err := cc.GetPartitionProperties(ctx, id, nil)
		if err != nil {
			t.Fatal(err)
		}
		if pp.IsEmpty {
			continue
		}
		want := int(pp.LastEnqueuedSequenceNumber - pp.BeginningSequenceNumber + 1)
		pc, err := cc.NewPartitionClient(id, &azeventhubs.PartitionClientOptions{StartPosition: azeventhubs.StartPosition{Earliest: new(true)}})
		if err != nil {
			t.Fatal(err)
		}
		for len(out[id]) < want {
			evs, err := pc.ReceiveEvents(ctx, want-len(out[id]), nil)
			if err != nil {
				t.Fatalf("partition %s: %v after %d of %d", id, err, len(out[id]), want)
			}
			out[id] = append(out[id], evs...)
		}
		pc.Close(ctx)
	}
	return out
}

func TestSendDemo(t *testing.T) {
	srv := startTestEmulator(t, 4)
	conn := srv.ConnectionString("orders")
	code, stdout, stderr := callSend(t, "--connection", conn, "--demo", "--count", "500", "--keys", "10")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "sent 500 events") {
		t.Errorf("stdout %q", stdout)
	}
	if strings.Contains(stdout+stderr, "SharedAccessKey=") {
		t.Error("the connection string was printed")
	}
	if strings.ContainsAny(stderr, "\r\033") {
		t.Errorf("stderr is not a terminal, yet it got a progress display: %q", stderr)
	}
	got := readAll(t, conn)
	n := 0
	keyPart := map[string]string{}
	for id, evs := range got {
		n += len(evs)
		for _, e := range evs {
			var o produce.Order
			if err := json.Unmarshal(e.Body, &o); err != nil {
				t.Fatal(err)
			}
			if e.PartitionKey == nil || *e.PartitionKey != o.Customer.ID {
				t.Fatalf("event key %v, customer %s", e.PartitionKey, o.Customer.ID)
			}
			if p, ok := keyPart[o.Customer.ID]; ok && p != id {
				t.Errorf("customer %s in partitions %s and %s", o.Customer.ID, p, id)
			}
			keyPart[o.Customer.ID] = id
		}
	}
	if n != 500 || len(keyPart) != 10 {
		t.Errorf("hub holds %d events of %d customers, want 500 of 10", n, len(keyPart))
	}
}

func TestSendLines(t *testing.T) {
	srv := startTestEmulator(t, 2)
	conn := srv.ConnectionString("orders")
	// big enough lines that the batch limit (1 MiB) splits them
	var b strings.Builder
	const lines = 300
	pad := strings.Repeat("x", 10_000)
	for i := range lines {
		b.WriteString(`{"n":` + itoa(i) + `,"pad":"` + pad + "\"}\n")
	}
	file := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := callSend(t, "--connection", conn, "--file", file, "--partition", "1", "--content-type", "application/json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "sent 300 events") {
		t.Errorf("stdout %q", stdout)
	}
	got := readAll(t, conn)
	if len(got["0"]) != 0 || len(got["1"]) != lines {
		t.Fatalf("partition 0 has %d, partition 1 has %d; want 0 and %d", len(got["0"]), len(got["1"]), lines)
	}
	for i, e := range got["1"] {
		var v struct{ N int }
		if err := json.Unmarshal(e.Body, &v); err != nil || v.N != i {
			t.Fatalf("event %d: n=%d err=%v", i, v.N, err)
		}
	}
}

// TestSendEveryKindOfEvent: every line is one event (a blank line an
// empty body), --property sets typed application properties, --keyed
// takes a partition key per line, and --body sends one event, empty too.
func TestSendEveryKindOfEvent(t *testing.T) {
	srv := startTestEmulator(t, 1)
	conn := srv.ConnectionString("orders")
	file := filepath.Join(t.TempDir(), "events.txt")
	if err := os.WriteFile(file, []byte("{\"a\":1}\n\n{\"a\":3}\nlast\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := callSend(t, "--connection", conn, "--file", file, "--property", "test=true", "--property", "v=2", "--property", "n='7'", "--property", "tag=x=y")
	if code != 0 || !strings.Contains(stdout, "sent 4 events") {
		t.Fatalf("exit %d, stdout %q, stderr %q; want 4 events sent", code, stdout, stderr)
	}
	keyed := filepath.Join(t.TempDir(), "keyed.txt")
	if err := os.WriteFile(keyed, []byte("k1\t{\"a\":5}\nk2\t\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, stdout, stderr := callSend(t, "--connection", conn, "--file", keyed, "--keyed"); code != 0 || !strings.Contains(stdout, "sent 2 events") {
		t.Fatalf("--keyed: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if code, stdout, stderr := callSend(t, "--connection", conn, "--body", "", "--partition-key", "k3"); code != 0 || !strings.Contains(stdout, "sent 1 events") {
		t.Fatalf("--body '': exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	got := readAll(t, conn)["0"]
	type ev struct {
		body, key string
		props     map[string]any
	}
	props := map[string]any{"test": true, "v": int64(2), "n": "7", "tag": "x=y"}
	want := []ev{
		{`{"a":1}`, "", props}, {``, "", props}, {`{"a":3}`, "", props}, {`last`, "", props},
		{`{"a":5}`, "k1", nil}, {``, "k2", nil},
		{``, "k3", nil},
	}
	if len(got) != len(want) {
		t.Fatalf("hub holds %d events, want %d", len(got), len(want))
	}
	for i, w := range want {
		e := got[i]
		key := ""
		if e.PartitionKey != nil {
			key = *e.PartitionKey
		}
		if string(e.Body) != w.body || key != w.key || fmt.Sprint(e.Properties) != fmt.Sprint(w.props) {
			t.Errorf("event %d: body %q key %q properties %v; want %q %q %v", i, e.Body, key, e.Properties, w.body, w.key, w.props)
		}
		for k, v := range w.props {
			if fmt.Sprintf("%T", e.Properties[k]) != fmt.Sprintf("%T", v) {
				t.Errorf("event %d: property %s is a %T, want a %T", i, k, e.Properties[k], v)
			}
		}
	}
}

func TestSendUsage(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		says string
	}{
		{"help", []string{"--help"}, 0, ""},
		{"nowhere", []string{"--demo"}, 2, "say where to connect"},
		{"key and partition", []string{"--connection", "Endpoint=sb://x/;SharedAccessKeyName=a;SharedAccessKey=b;EntityPath=h", "--partition-key", "k", "--partition", "1"}, 2, "mutually exclusive"},
		{"count without demo", []string{"--connection", "x", "--count", "5"}, 2, "go with --demo"},
		{"no hub", []string{"--connection", "Endpoint=sb://x/;SharedAccessKeyName=a;SharedAccessKey=b"}, 2, "no event hub"},
		{"bad partition", []string{"--connection", "x", "--partition", "one"}, 2, "partition"},
		{"connector without file", []string{"--connector", "a"}, 2, "needs -c"},
		{"positional", []string{"extra"}, 2, "unexpected argument"},
		{"property without =", []string{"--connection", "x", "--property", "k"}, 2, `"k": want K=V`},
		{"body and file", []string{"--connection", "x", "--body", "", "--file", "f"}, 2, "--body sends one event"},
		{"body with a line break", []string{"--connection", "x", "--body", "a\nb"}, 2, "must not hold a line break"},
		{"keyed and key", []string{"--connection", "x", "--keyed", "--partition-key", "k"}, 2, "--keyed takes the partition key of each line"},
		{"demo and property", []string{"--connection", "x", "--demo", "--property", "a=b"}, 2, "--demo generates its own"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := callSend(t, tt.args...)
			if code != tt.code || !strings.Contains(stderr, tt.says) {
				t.Errorf("exit %d, stderr %q; want exit %d saying %q", code, stderr, tt.code, tt.says)
			}
			if tt.name == "help" && !strings.Contains(stdout, "Usage: ehsink send") {
				t.Errorf("--help printed %q", stdout)
			}
		})
	}
}

func TestSendFromConfig(t *testing.T) {
	srv := startTestEmulator(t, 2)
	cfg := writeConfig(t, `
emulator:
  listen: `+srv.Addr()+`
connectors:
  - name: demo
    source:
      connection: emulator
      eventhub: orders
    sink:
      type: stdout
`)
	code, stdout, stderr := callSend(t, "-c", cfg, "--demo", "--count", "20")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, `sent 20 events to event hub "orders"`) {
		t.Errorf("stdout %q", stdout)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestSendThroughCustomEndpoint: with -c, send connects where the
// connector's source.custom_endpoint says, as the connector does: the
// connection string names an address nothing listens on.
func TestSendThroughCustomEndpoint(t *testing.T) {
	srv := startTestEmulator(t, 2)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	conn := strings.Replace(srv.ConnectionString("orders"), srv.Addr(), dead, 1)
	cfg := writeConfig(t, `
connectors:
  - name: demo
    source:
      connection: "`+conn+`"
      custom_endpoint: `+srv.Addr()+`
    sink:
      type: stdout
`)
	code, _, stderr := callSend(t, "-c", cfg, "--demo", "--count", "20")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	n := 0
	for _, evs := range readAll(t, srv.ConnectionString("orders")) {
		n += len(evs)
	}
	if n != 20 {
		t.Fatalf("the hub holds %d events, want 20", n)
	}
}
