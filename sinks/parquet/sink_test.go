package parquet

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/ehsink/ehsink/dedupe"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ehsink/ehsink/internal/record"
	"github.com/ehsink/ehsink/internal/table/mapping"
	"github.com/ehsink/ehsink/internal/testenv"
	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/sinks/sinktest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.StopSharedAzurite()
	if code == 0 {
		// Idle keep-alive connections of the Blob client are the
		// transport's, not leaks of the sink.
		if err := goleak.Find(
			goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
			goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func ctxT(t *testing.T) context.Context {
	t.Helper()
	return t.Context()
}

func open(t *testing.T, s *sink, partition string) (*writer, *sinks.Position) {
	t.Helper()
	w, pos, err := s.Open(ctxT(t), partition)
	if err != nil {
		t.Fatalf("Open %s: %v", partition, err)
	}
	return w.(*writer), pos
}

func writeAll(t *testing.T, w *writer, events []sinks.Event) {
	t.Helper()
	if err := w.Write(ctxT(t), events); err != nil {
		t.Fatalf("Write: %v", err)
	}
}

func flush(t *testing.T, w *writer) *sinks.Position {
	t.Helper()
	pos, err := w.Flush(ctxT(t))
	if err != nil {
		t.Fatalf("Flush: %v", err)
	}
	return pos
}

// replay is what the runner does after a restart: resume after the later
// of the checkpoint and the sink's watermark, in batches of 10.
func replay(t *testing.T, w *writer, checkpoint, watermark *sinks.Position, events []sinks.Event) {
	t.Helper()
	from := dedupe.Later(checkpoint, watermark)
	var todo []sinks.Event
	for _, e := range events {
		if !dedupe.Covers(from, e.SequenceNumber) {
			todo = append(todo, e)
		}
	}
	for len(todo) > 0 {
		n := min(10, len(todo))
		writeAll(t, w, todo[:n])
		todo = todo[n:]
	}
	flush(t, w)
}

// wantExactlyOnce checks that the data files of partition hold each of
// from..to once, in order, except the dead-lettered ones.
func wantExactlyOnce(t *testing.T, d destination, partition string, from, to int64, deadLettered ...int64) {
	t.Helper()
	got := committedSeqs(t, d, partition)
	var want []int64
	for s := from; s <= to; s++ {
		if !slices.Contains(deadLettered, s) {
			want = append(want, s)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("partition %s holds %v, want each of %d..%d exactly once", partition, got, from, to)
	}
}

func forEachDestination(t *testing.T, f func(t *testing.T, d destination)) {
	t.Run("local", func(t *testing.T) { f(t, localDestination(t)) })
	t.Run("blob", func(t *testing.T) { f(t, blobDestination(t)) })
}

func TestConformance(t *testing.T) {
	forEachDestination(t, func(t *testing.T, _ destination) {
		dests := map[string]destination{}
		mk := localDestination
		if strings.HasSuffix(t.Name(), "/blob") {
			mk = blobDestination
		}
		get := func(t *testing.T) destination {
			// One destination per kit case, shared by its restarts.
			key := t.Name()
			if d, ok := dests[key]; ok {
				return d
			}
			d := mk(t)
			dests[key] = d
			return d
		}
		sinktest.Run(t, sinktest.Harness{
			New: func(t *testing.T) sinks.Sink { return newSink(t, get(t), nil) },
			Committed: func(t *testing.T, partition string) []int64 {
				return committedSeqs(t, get(t), partition)
			},
			BadEvent: func(partition string, seq int64) sinks.Event {
				e := sinktest.Event(partition, seq)
				e.Body = []byte(`{"id":"bad","seq":4,"customer":"c","amount":"not a number","ts":"2026-01-02T03:04:05Z"}`)
				return e
			},
			// A file that overlaps a newer commit is dropped at Flush.
			Fencing: true,
		})
	})
}

func TestCrashAndRestart(t *testing.T) {
	events := sinktest.Events("0", 0, 99)
	cases := []struct {
		name string
		// crash runs the first life of the process and says where the
		// checkpoint was when it died.
		crash func(t *testing.T, s *sink) (checkpoint *sinks.Position)
		// wantDL is the dead letters expected in the end.
		wantDL []int64
	}{
		{
			name: "between write and publish",
			crash: func(t *testing.T, s *sink) *sinks.Position {
				w, _ := open(t, s, "0")
				writeAll(t, w, events[:50])
				cp := flush(t, w)
				writeAll(t, w, events[50:80])
				return cp // dies here: no Flush, no Close
			},
		},
		{
			name: "between publish and checkpoint",
			crash: func(t *testing.T, s *sink) *sinks.Position {
				w, _ := open(t, s, "0")
				writeAll(t, w, events[:50])
				cp := flush(t, w)
				writeAll(t, w, events[50:80])
				flush(t, w)
				return cp // the checkpoint still says 49
			},
		},
		{
			name: "between dead-letter commit and data commit",
			crash: func(t *testing.T, s *sink) *sinks.Position {
				crash := errors.New("simulated crash")
				s.wrapStore(func(st store) store {
					return &faultStore{store: st, commitErr: func(name string) error {
						if strings.HasSuffix(name, ".parquet") && strings.Contains(name, "-00000000000000000079") {
							return crash
						}
						return nil
					}}
				})
				w, _ := open(t, s, "0")
				writeAll(t, w, events[:50])
				cp := flush(t, w)
				batch := slices.Clone(events[50:80])
				batch[5] = badEvent(batch[5])
				err := w.Write(ctxT(t), batch)
				var be *sinks.BatchError
				if !errors.As(err, &be) || len(be.Failed) != 1 {
					t.Fatalf("Write: %v, want one failed event", err)
				}
				if err := w.DeadLetter(ctxT(t), []sinks.DeadLetter{{Event: batch[5], Reason: be.Failed[0].Err.Error()}}); err != nil {
					t.Fatal(err)
				}
				if _, err := w.Flush(ctxT(t)); !errors.Is(err, crash) {
					t.Fatalf("Flush: %v, want the simulated crash", err)
				}
				return cp
			},
			wantDL: []int64{55},
		},
	}
	forEachDestination(t, func(t *testing.T, d destination) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				d := d
				if d.name == "local" {
					d = localDestination(t)
				} else {
					d = blobDestination(t)
				}
				cp := tc.crash(t, newSink(t, d, nil))

				// Restart: a new sink, as a new process would build.
				s := newSink(t, d, nil)
				w, wm := open(t, s, "0")
				defer w.Close(ctxT(t))
				if left := d.temps(t); len(left) != 0 {
					t.Fatalf("temporary files left after Open: %v", left)
				}
				input := slices.Clone(events)
				for _, seq := range tc.wantDL {
					input[seq] = badEvent(input[seq])
				}
				replayWithDeadLetters(t, w, cp, wm, input)
				wantExactlyOnce(t, d, "0", 0, 99, tc.wantDL...)
				if got := deadLetterSeqs(t, d); !slices.Equal(got, tc.wantDL) {
					t.Fatalf("dead letters %v, want %v exactly once", got, tc.wantDL)
				}
				if left := d.temps(t); len(left) != 0 {
					t.Fatalf("temporary files left: %v", left)
				}
			})
		}
	})
}

// replayWithDeadLetters is replay with the runner's dead-letter step.
func replayWithDeadLetters(t *testing.T, w *writer, checkpoint, watermark *sinks.Position, events []sinks.Event) {
	t.Helper()
	from := dedupe.Later(checkpoint, watermark)
	var todo []sinks.Event
	for _, e := range events {
		if !dedupe.Covers(from, e.SequenceNumber) {
			todo = append(todo, e)
		}
	}
	for len(todo) > 0 {
		n := min(10, len(todo))
		err := w.Write(ctxT(t), todo[:n])
		var be *sinks.BatchError
		if errors.As(err, &be) {
			var letters []sinks.DeadLetter
			for _, f := range be.Failed {
				letters = append(letters, sinks.DeadLetter{Event: todo[f.Index], Reason: f.Err.Error()})
			}
			if err := w.DeadLetter(ctxT(t), letters); err != nil {
				t.Fatal(err)
			}
		} else if err != nil {
			t.Fatal(err)
		}
		todo = todo[n:]
	}
	flush(t, w)
}

// badEvent is e with an amount that does not convert.
func badEvent(e sinks.Event) sinks.Event {
	e.Body = bytes.Replace(e.Body, []byte(`"amount":`), []byte(`"amount":"x",  "was":`), 1)
	return e
}

// deadLetterSeqs reads every dead-letter file and returns their sequence numbers.
func deadLetterSeqs(t *testing.T, d destination) []int64 {
	t.Helper()
	var out []int64
	for name, data := range d.files(t) {
		if !strings.Contains(name, "/"+deadLetterDir+"/") {
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			var l record.DeadLetter
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if l.Reason == "" {
				t.Fatalf("%s: dead letter %d without a reason", name, l.SequenceNumber)
			}
			out = append(out, l.SequenceNumber)
		}
	}
	slices.Sort(out)
	return out
}

// faultStore fails commits chosen by commitErr, standing for a crash at
// that point.
type faultStore struct {
	store
	commitErr func(name string) error
}

func (f *faultStore) create(ctx context.Context, dir, tag string) (pending, error) {
	p, err := f.store.create(ctx, dir, tag)
	if err != nil {
		return nil, err
	}
	return &faultPending{pending: p, f: f}, nil
}

type faultPending struct {
	pending
	f *faultStore
}

func (p *faultPending) commit(ctx context.Context, name string) error {
	if err := p.f.commitErr(name); err != nil {
		return err
	}
	return p.pending.commit(ctx, name)
}

func TestTwoWritersSameRangeSameFile(t *testing.T) {
	// A replay of a committed range (a second owner that opened before the
	// first committed) produces the same name and replaces the file whole.
	forEachDestination(t, func(t *testing.T, d destination) {
		a, b := newSink(t, d, nil), newSink(t, d, nil)
		wa, _ := open(t, a, "3")
		wb, _ := open(t, b, "3")
		writeAll(t, wa, sinktest.Events("3", 0, 19))
		writeAll(t, wb, sinktest.Events("3", 0, 19))
		flush(t, wa)
		flush(t, wb)
		wantExactlyOnce(t, d, "3", 0, 19)
		if n := len(d.files(t)); n != 1 {
			t.Fatalf("%d files, want 1", n)
		}
	})
}

func TestCloseDiscardsOpenFile(t *testing.T) {
	forEachDestination(t, func(t *testing.T, d destination) {
		s := newSink(t, d, nil)
		w, _ := open(t, s, "1")
		writeAll(t, w, sinktest.Events("1", 0, 9))
		if err := w.Close(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(ctxT(t)); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		if f := d.files(t); len(f) != 0 {
			t.Fatalf("visible after Close without Flush: %v", f)
		}
		if left := d.temps(t); len(left) != 0 {
			t.Fatalf("temporary files left after Close: %v", left)
		}
		if err := w.Write(ctxT(t), sinktest.Events("1", 10, 10)); !errors.Is(err, sinks.ErrClosed) {
			t.Fatalf("Write after Close: %v, want ErrClosed", err)
		}
		_, pos := open(t, s, "1")
		if pos != nil {
			t.Fatalf("watermark %v after a discarded file, want none", pos)
		}
	})
}

func TestWatermarkFromNewestFile(t *testing.T) {
	forEachDestination(t, func(t *testing.T, d destination) {
		s := newSink(t, d, nil)
		w, _ := open(t, s, "2")
		// Two dates, so the newest file is in another folder.
		early := sinktest.Events("2", 0, 9)
		late := sinktest.Events("2", 10, 19)
		for i := range late {
			late[i].EnqueuedTime = late[i].EnqueuedTime.Add(48 * time.Hour)
		}
		writeAll(t, w, early)
		flush(t, w)
		writeAll(t, w, late)
		flush(t, w)
		w.Close(ctxT(t))
		_, pos := open(t, newSink(t, d, nil), "2")
		if pos == nil || pos.SequenceNumber != 19 || pos.Offset != late[9].Offset {
			t.Fatalf("watermark %+v, want seq 19 offset %s", pos, late[9].Offset)
		}
		_, other := open(t, newSink(t, d, nil), "20")
		if other != nil {
			t.Fatalf("partition 20 watermark %+v, want none (partition 2's files are not its)", other)
		}
		var names []string
		for n := range d.files(t) {
			names = append(names, n)
		}
		slices.Sort(names)
		want := []string{
			"orders/partition=2/date=2026-01-02/2-00000000000000000000-00000000000000000009.parquet",
			"orders/partition=2/date=2026-01-04/2-00000000000000000010-00000000000000000019.parquet",
		}
		if !slices.Equal(names, want) {
			t.Fatalf("files %v, want %v", names, want)
		}
	})
}

func TestDeadLetters(t *testing.T) {
	forEachDestination(t, func(t *testing.T, d destination) {
		s := newSink(t, d, nil)
		w, _ := open(t, s, "0")
		batch := sinktest.Events("0", 0, 9)
		batch[0] = badEvent(batch[0])
		batch[7].Body = []byte("\xff not json")
		err := w.Write(ctxT(t), batch)
		var be *sinks.BatchError
		if !errors.As(err, &be) {
			t.Fatalf("Write: %v, want *sinks.BatchError", err)
		}
		var idx []int
		var letters []sinks.DeadLetter
		for _, f := range be.Failed {
			idx = append(idx, f.Index)
			letters = append(letters, sinks.DeadLetter{Event: batch[f.Index], Reason: f.Err.Error(), FailedAt: time.Unix(1, 0)})
		}
		if !slices.Equal(idx, []int{0, 7}) {
			t.Fatalf("failed %v, want [0 7]", idx)
		}
		if err := w.DeadLetter(ctxT(t), letters); err != nil {
			t.Fatal(err)
		}
		if pos := flush(t, w); pos.SequenceNumber != 9 {
			t.Fatalf("watermark %d, want 9", pos.SequenceNumber)
		}
		if got := deadLetterSeqs(t, d); !slices.Equal(got, []int64{0, 7}) {
			t.Fatalf("dead letters %v, want [0 7]", got)
		}
		if got := committedSeqs(t, d, "0"); !slices.Equal(got, []int64{1, 2, 3, 4, 5, 6, 8, 9}) {
			t.Fatalf("data %v", got)
		}
		files := d.files(t)
		dl := files["orders/partition=0/date=2026-01-02/_dead_letters/0-00000000000000000000-00000000000000000009.jsonl"]
		if !bytes.Contains(dl, []byte(`"body_encoding":"base64"`)) || !bytes.Contains(dl, []byte(`"reason":"column \"amount\"`)) {
			t.Fatalf("dead-letter file:\n%s", dl)
		}

		// A commit with dead letters only still records its range.
		bad := badEvent(sinktest.Event("0", 10))
		if err := w.Write(ctxT(t), []sinks.Event{bad}); err == nil {
			t.Fatal("Write of a bad event: no error")
		}
		if err := w.DeadLetter(ctxT(t), []sinks.DeadLetter{{Event: bad, Reason: "bad"}}); err != nil {
			t.Fatal(err)
		}
		flush(t, w)
		w.Close(ctxT(t))
		if _, pos := open(t, newSink(t, d, nil), "0"); pos == nil || pos.SequenceNumber != 10 {
			t.Fatalf("watermark after a dead-letter-only commit: %+v, want 10", pos)
		}
	})
}

func TestFlushDue(t *testing.T) {
	start := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name   string
		edit   func(*sinkConfig)
		events int
		after  time.Duration
		want   bool
	}{
		{"nothing written", nil, 0, time.Hour, false},
		{"under every limit", nil, 10, time.Minute, false},
		{"max rows", func(c *sinkConfig) { c.MaxRows = 10 }, 10, 0, true},
		{"one row under max rows", func(c *sinkConfig) { c.MaxRows = 11 }, 10, 0, false},
		{"max bytes", func(c *sinkConfig) { c.MaxBytes = 1024 }, 100, 0, true},
		{"max age", func(c *sinkConfig) { c.MaxAge = time.Minute }, 1, time.Minute, true},
		{"just under max age", func(c *sinkConfig) { c.MaxAge = time.Minute }, 1, time.Minute - time.Millisecond, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := &clock{t: start}
			s := newSink(t, localDestination(t), tc.edit)
			s.setClock(clk.now)
			w, _ := open(t, s, "0")
			defer w.Close(ctxT(t))
			if tc.events > 0 {
				writeAll(t, w, sinktest.Events("0", 0, int64(tc.events-1)))
			}
			if got := w.FlushDue(start.Add(tc.after)); got != tc.want {
				t.Fatalf("FlushDue = %v, want %v", got, tc.want)
			}
			if tc.want {
				flush(t, w)
				if w.FlushDue(start.Add(tc.after)) {
					t.Fatal("FlushDue after Flush = true, want false")
				}
			}
		})
	}
}

func TestRowGroupsWrittenAsTheyFill(t *testing.T) {
	d := localDestination(t)
	s := newSink(t, d, func(c *sinkConfig) { c.RowGroupSize = 64 << 10 })
	w, _ := open(t, s, "0")
	defer w.Close(ctxT(t))
	events := sinktest.Events("0", 0, 19_999)
	for i := 0; i < len(events); i += 500 {
		writeAll(t, w, events[i:i+500])
	}
	df := w.file.files[0]
	if df.counter.n == 0 {
		t.Fatal("nothing reached the temporary file before Flush: the whole file is in memory")
	}
	if inMemory := df.pw.Size() - df.counter.n; inMemory > 2*(64<<10) {
		t.Fatalf("%d bytes buffered, want about one row group (64 KiB)", inMemory)
	}
	flush(t, w)
	for name, data := range d.files(t) {
		rdr, err := parquetReader(data)
		if err != nil {
			t.Fatal(err)
		}
		if n := rdr.NumRowGroups(); n < 2 {
			t.Fatalf("%s: %d row group(s), want several", name, n)
		}
		rdr.Close()
	}
	wantExactlyOnce(t, d, "0", 0, 19_999)
}

func TestTypesRoundTrip(t *testing.T) {
	col := func(name, from, typ string, nullable bool) mapping.Column {
		c, err := mapping.NewColumn(name, from, typ)
		if err != nil {
			t.Fatal(err)
		}
		c.Nullable = nullable
		return c
	}
	cols := mapping.Columns{
		col("s", "$.s", "string", false),
		col("i32", "$.i32", "int32", false),
		col("i64", "$.i64", "int64", false),
		col("d", "$.d", "double", false),
		col("b", "$.b", "boolean", false),
		col("ts_ms", "$.ts", "timestamp(ms)", false),
		col("ts_us", "$.ts", "timestamp(us)", false),
		col("dec", "$.dec", "decimal(9,2)", false),
		col("dec18", "$.dec", "decimal(18,4)", false),
		col("dec30", "$.big", "decimal(30,3)", false),
		col("j", "$.j", "json", false),
		col("u", "$.u", "uuid", false),
		col("opt", "$.opt", "string", true),
		col("seq", "@sequence_number", "", false),
	}
	ts := time.Date(2026, 3, 4, 5, 6, 7, 123456000, time.UTC)
	body := func(i int, opt string) string {
		return fmt.Sprintf(`{"s":"héllo %d","i32":%d,"i64":%d,"d":%d.5,"b":%v,"ts":"%s","dec":"-%d.25","big":"-123456789012345678901234.%03d","j":{"k":[%d,true]},"u":"123e4567-e89b-12d3-a456-42661417400%d"%s}`,
			i, -i, int64(i)<<40, i, i%2 == 0, ts.Add(time.Duration(i)*time.Second).Format(time.RFC3339Nano), i, i, i, i, opt)
	}
	var events []sinks.Event
	for i := 0; i < 4; i++ {
		opt := fmt.Sprintf(`,"opt":"o%d"`, i)
		if i == 2 {
			opt = ""
		}
		events = append(events, sinks.Event{Partition: "7", SequenceNumber: int64(i), Offset: fmt.Sprint(i), EnqueuedTime: ts, Body: []byte(body(i, opt))})
	}
	forEachDestination(t, func(t *testing.T, d destination) {
		for _, comp := range []string{"zstd", "snappy", "none"} {
			t.Run(comp, func(t *testing.T) {
				c := d.config()
				c.Columns = cols
				c.Compression = comp
				c.Path = "{eventhub}/" + comp + "/{partition}-{first_seq}-{last_seq}.parquet"
				s, err := newParquetSink(ctxT(t), c, sinks.Info{Connector: "types", EventHub: "hub"})
				if err != nil {
					t.Fatal(err)
				}
				w, _ := open(t, s, "7")
				writeAll(t, w, events)
				flush(t, w)
				w.Close(ctxT(t))
				name := "hub/" + comp + "/7-0-3.parquet"
				data, ok := d.files(t)[name]
				if !ok {
					t.Fatalf("no file %s", name)
				}
				tb := readParquet(t, name, data)
				wantTypes := []string{"s:utf8", "i32:int32", "i64:int64", "d:float64", "b:bool",
					"ts_ms:timestamp[ms, tz=UTC]", "ts_us:timestamp[us, tz=UTC]", "dec:decimal(9, 2)", "dec18:decimal(18, 4)",
					"dec30:decimal(30, 3)", "j:utf8", "u:extension<arrow.uuid>", "opt:utf8", "seq:int64"}
				var gotTypes []string
				for _, f := range tb.Fields {
					gotTypes = append(gotTypes, f.Name+":"+f.Type.String())
				}
				if !slices.Equal(gotTypes, wantTypes) {
					t.Fatalf("columns\n got %v\nwant %v", gotTypes, wantTypes)
				}
				if len(tb.Rows) != len(events) {
					t.Fatalf("%d rows, want %d", len(tb.Rows), len(events))
				}
				for i, r := range tb.Rows {
					want := map[string]any{
						"s": fmt.Sprintf("héllo %d", i), "i32": int32(-i), "i64": int64(i) << 40, "d": float64(i) + 0.5,
						"b": i%2 == 0, "ts_ms": ts.Add(time.Duration(i) * time.Second).Truncate(time.Millisecond),
						"ts_us": ts.Add(time.Duration(i) * time.Second).Truncate(time.Microsecond),
						"dec":   fmt.Sprintf("%de-2", -(i*100 + 25)), "dec18": fmt.Sprintf("%de-4", -(i*10000 + 2500)),
						"dec30": fmt.Sprintf("-123456789012345678901234%03de-3", i),
						"j":     fmt.Sprintf(`{"k":[%d,true]}`, i), "u": fmt.Sprintf("123e4567-e89b-12d3-a456-42661417400%d", i),
						"opt": fmt.Sprintf("o%d", i), "seq": int64(i),
					}
					if i == 2 {
						want["opt"] = nil
					}
					for k, v := range want {
						if fmt.Sprint(r[k]) != fmt.Sprint(v) {
							t.Errorf("row %d column %s = %v (%T), want %v", i, k, r[k], r[k], v)
						}
					}
				}
			})
		}
	})
}
