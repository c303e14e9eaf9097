package cli

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ehsink/ehsink/internal/deltalog"
	"github.com/ehsink/ehsink/internal/parquettest"
)

// deltaLetterConfig is a connector reading the emulator at listen into a
// Delta table under dir; customer is the source of the customer column
// and extra more connector keys.
func deltaLetterConfig(dir, listen, customer, extra string) string {
	return emulatorConnector(dir, listen, extra) + `
      type: delta
      table: ` + filepath.Join(dir, "orders") + `
      max_age: 100ms
      columns:
        - {name: id, from: $.id, nullable: false}
        - {name: customer, from: "` + customer + `", nullable: false}
        - {name: amount, from: $.amount, type: "decimal(7,2)"}
        - {name: seq, from: "@sequence_number", type: int64}
`
}

// deltaOrders reads the local Delta table as a reader does (package
// deltalog: checkpoint and commits), one "id|customer|amount|seq" per
// row, by seq.
func deltaOrders(t *testing.T, table string) (rows []string, version int64) {
	t.Helper()
	store, err := deltalog.NewLocalStore(table)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := deltalog.New(store).Load(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	bySeq := map[int64]string{}
	for _, a := range snap.SortedFiles() {
		p, _ := url.PathUnescape(a.Path)
		tb, err := parquettest.ReadFile(filepath.Join(table, filepath.FromSlash(p)))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range tb.Rows {
			bySeq[r["seq"].(int64)] = fmt.Sprintf("%v|%v|%v|%v", r["id"], r["customer"], r["amount"], r["seq"])
		}
	}
	seqs := make([]int64, 0, len(bySeq))
	for s := range bySeq {
		seqs = append(seqs, s)
	}
	slices.Sort(seqs)
	for _, s := range seqs {
		rows = append(rows, bySeq[s])
	}
	return rows, snap.Version
}

// TestDeadLettersReplayDelta: a real run into a Delta table whose mapping
// takes the customer from the body, which some events lack (the producer
// moved it to the partition key), leaves rows and letters in the
// dead-letter table. The config is then corrected (the customer from the
// partition key, test events filtered out): list and show read the
// letters, a dry run writes nothing, a replay cancelled after its first
// letter and a replay of all leave exactly the rows of a correct first
// run; the letter whose amount no mapping takes stays, with the new
// revision, and a second replay writes nothing.
func TestDeadLettersReplayDelta(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	table := filepath.Join(dir, "orders")
	listen := freeAddr(t)
	first := writeIn(t, dir, "first.yaml", deltaLetterConfig(dir, listen, "$.customer", ""))
	fixed := writeIn(t, dir, "fixed.yaml", deltaLetterConfig(dir, listen, "@partition_key", `
    filter: {drop: "$.test == true"}`))
	events := writeIn(t, dir, "events.tsv", strings.Join([]string{
		"c-1\t" + `{"id":"o-1","customer":"c-1","amount":12.5}`,
		"c-2\t" + `{"id":"o-2","amount":3}`,
		"c-3\t" + `{"id":"o-3","customer":"c-3","amount":7}`,
		"c-4\t" + `{"id":"o-4","customer":"c-4","amount":"lots"}`,
		"c-5\t" + `{"id":"t-5","amount":1,"test":true}`,
		"c-6\t" + `{"id":"o-6","amount":6}`,
		"c-7\t" + `{"id":"o-7","customer":"c-7","amount":9}`,
	}, "\n")+"\n")
	letters := func() string {
		t.Helper()
		_, out, _ := cli(t, "deadletters", "list", "-c", fixed, "--replayed")
		return out
	}

	firstRun(t, ctx, first, listen, []string{"--keyed", "--file", events}, "3 rows and 4 dead letters", func() bool {
		if _, err := os.Stat(filepath.Join(table, deltalog.CommitName(0))); err != nil {
			return false
		}
		rows, _ := deltaOrders(t, table)
		return len(rows) == 3 && strings.Contains(letters(), "4 letter(s)")
	})

	code, out, stderr := cli(t, "deadletters", "list", "-c", fixed)
	t.Logf("list:\n%s", out)
	if code != exitOK || !strings.Contains(out, "4 letter(s)") || !strings.Contains(out, `column "customer": missing value`) || !strings.Contains(out, `column "amount"`) {
		t.Fatalf("list: exit %d\n%s%s\nwant 4 letters: 3 without a customer, 1 amount", code, out, stderr)
	}
	// The letter of sequence number 1 (partition 0): 1 × 10,000 + 0 + 1.
	code, out, stderr = cli(t, "deadletters", "show", "-c", fixed, "10001")
	t.Logf("show:\n%s", out)
	for _, want := range []string{"sequence number: 1", `"id": "o-2"`, "partition key:   c-2", "revision:        " + revisionOf(t, first) + " (the file's now: " + revisionOf(t, fixed) + ")"} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Fatalf("show: exit %d\n%s%s\nwant %q", code, out, stderr, want)
		}
	}

	before, version := deltaOrders(t, table)
	code, out, _ = cli(t, "deadletters", "replay", "-c", fixed, "--dry-run")
	t.Logf("replay --dry-run:\n%s", out)
	if code != exitFailure || !strings.Contains(out, "4 letter(s): 2 would be replayed (dry run: nothing written), 1 dropped by the filter, 1 failed again") ||
		!strings.Contains(out, `customer: "c-2"`) {
		t.Fatalf("dry run: exit %d\n%s\nwant 2 replayed, 1 dropped, 1 failed again (exit 1)", code, out)
	}
	if rows, v := deltaOrders(t, table); v != version || !reflect.DeepEqual(rows, before) {
		t.Fatalf("the dry run wrote: version %d -> %d, rows %q", version, v, rows)
	}

	// A replay cancelled (as by Ctrl-C) once it has reported its first
	// letter; then a replay of all.
	replayCancelledAfterOne(t, ctx, fixed)
	if rows, _ := deltaOrders(t, table); len(rows) != 4 {
		t.Fatalf("the cancelled replay left %q, want the first letter's row written", rows)
	}
	code, out, _ = cli(t, "deadletters", "replay", "-c", fixed)
	t.Logf("replay:\n%s", out)
	if code != exitFailure || !strings.Contains(out, "3 letter(s): 1 replayed, 1 dropped by the filter, 1 failed again") {
		t.Fatalf("replay: exit %d\n%s", code, out)
	}
	want := []string{"o-1|c-1|1250e-2|0", "o-2|c-2|300e-2|1", "o-3|c-3|700e-2|2", "o-6|c-6|600e-2|5", "o-7|c-7|900e-2|6"} // amounts as unscaled values e-scale
	if rows, _ := deltaOrders(t, table); !reflect.DeepEqual(rows, want) {
		t.Fatalf("after the replay the table holds %q, want what a correct first run writes %q", rows, want)
	}
	code, out, _ = cli(t, "deadletters", "show", "-c", fixed, "30001")
	if code != exitOK || !strings.Contains(out, "revision:        "+revisionOf(t, fixed)+" ") || strings.Contains(out, "replayed at") {
		t.Fatalf("the letter left: exit %d\n%s\nwant the revision that refused it again", code, out)
	}
	code, out, _ = cli(t, "deadletters", "replay", "-c", fixed, "--id", "10001", "--id", "30001")
	if code != exitFailure || !strings.Contains(out, "1 letter(s): 0 replayed, 0 dropped by the filter, 1 failed again") {
		t.Fatalf("second replay: exit %d\n%s", code, out)
	}
	if rows, _ := deltaOrders(t, table); !reflect.DeepEqual(rows, want) {
		t.Fatalf("the second replay wrote: %q", rows)
	}
	if out := letters(); !strings.Contains(out, "4 letter(s)") {
		t.Fatalf("list --replayed:\n%s\nwant the 4 letters, replayed or not", out)
	}
}
