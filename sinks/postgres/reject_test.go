package postgres

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ehsink/ehsink/internal/testenv"
	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/sinks/sinktest"
)

// serverRule is a rule only the server checks, and how to break it.
type serverRule struct {
	name   string
	want   string // in the dead letter's reason
	break_ func(body string, seq int64) string
}

func serverRules(table string) []serverRule {
	return []serverRule{
		{"check", "amount_not_negative", func(b string, _ int64) string {
			return strings.Replace(b, `"amount":`, `"amount":-1,"x":`, 1)
		}},
		{"not null", `violates not-null constraint`, func(b string, _ int64) string {
			return strings.Replace(b, `"customer":`, `"customer":null,"x":`, 1)
		}},
		// The seq column is unique: a copy of the previous event's value
		// clashes with a row committed or applied before it.
		{"unique", table + "_seq_key", func(b string, seq int64) string {
			return strings.Replace(b, `"seq":`, fmt.Sprintf(`"seq":%d,"x":`, seq-1), 1)
		}},
		{"foreign key", table + "_customer_fkey", func(b string, _ int64) string {
			return strings.Replace(b, `"customer":`, `"customer":"nobody","x":`, 1)
		}},
	}
}

// addServerRules gives table a CHECK, a NOT NULL, a unique and a foreign-key
// rule; the foreign key is deferred when deferred is set, so that it fails
// at COMMIT.
func addServerRules(t *testing.T, dsn, table string, deferred bool) {
	t.Helper()
	execSQL(t, dsn, `CREATE TABLE customers (name text PRIMARY KEY)`)
	execSQL(t, dsn, `INSERT INTO customers SELECT 'c-' || g FROM generate_series(0, 6) g`)
	fk := `FOREIGN KEY (customer) REFERENCES customers (name)`
	if deferred {
		fk += ` DEFERRABLE INITIALLY DEFERRED`
	}
	execSQL(t, dsn, `ALTER TABLE `+table+` ADD CONSTRAINT amount_not_negative CHECK (amount >= 0),
		ALTER COLUMN customer SET NOT NULL,
		ADD CONSTRAINT `+table+`_seq_key UNIQUE (seq),
		ADD CONSTRAINT `+table+`_customer_fkey `+fk)
}

// TestServerRefusedRows breaks rules only the server checks in 12 of 300
// events (first and last of the partition, first and last of a batch, side
// by side): the other 288 are committed once, each refused event is a dead
// letter once with the server's message, and the watermark covers them
// all. The first run crashes right after the commit of a batch holding
// refused rows (before its checkpoint); the restart replays it and writes
// nothing twice; a second replay from the start adds nothing either.
func TestServerRefusedRows(t *testing.T) {
	const last = 299
	for _, mode := range []string{modeAppend, modeUpsert} {
		t.Run(mode, func(t *testing.T) {
			dsn := newDB(t)
			table := "orders"
			cfg := appendConfig(t, dsn)
			if mode == modeUpsert {
				table = "latest"
				cfg = upsertConfig(t, dsn)
				cfg.Key = []string{"id"}
				newTestSink(t, cfg).Close(testCtx(t)) // creates the table
			} else {
				execSQL(t, dsn, appendTable)
			}
			addServerRules(t, dsn, table, mode == modeAppend)
			rules := serverRules(table)
			events := sinktest.Events("3", 0, last)
			bad := map[int64]serverRule{}
			byName := map[string]serverRule{}
			for _, r := range rules {
				byName[r.name] = r
			}
			// A unique breaker copies the previous event's seq, which must
			// be one the server took.
			for seq, name := range map[int64]string{0: "check", 37: "check", 38: "not null", 49: "foreign key",
				50: "not null", 120: "unique", 150: "foreign key", 151: "check", 200: "unique", 249: "not null",
				273: "foreign key", 299: "unique"} {
				r := byName[name]
				events[seq].Body = []byte(r.break_(string(events[seq].Body), seq))
				bad[seq] = r
			}

			cp := &checkpointStore{seq: map[string]int64{}}
			// The runner hands the sink a logger that already names the
			// connector; the sink's own lines must not name it again.
			var logs testenv.LogBuffer
			info := testInfo
			info.Logger = slog.New(slog.NewTextHandler(&logs, nil)).With("connector", testInfo.Connector)
			s1, err := newPostgresSink(testCtx(t), cfg, info)
			if err != nil {
				t.Fatal(err)
			}
			if runPartition(t, s1, cp, "3", events, 50, func(p string, flushes int) bool {
				return p == "after-commit" && flushes == 2 // seq 50..99 holds refused 50
			}) {
				t.Fatal("the crash after commit was not injected")
			}
			s1.Close(testCtx(t))
			refusals := 0
			for _, line := range strings.Split(logs.String(), "\n") {
				if strings.Contains(line, "rows refused by the server") {
					refusals++
					if n := strings.Count(line, "connector="); n != 1 {
						t.Errorf("log line names the connector %d times: %s", n, line)
					}
				}
			}
			if refusals == 0 {
				t.Errorf("no log line about refused rows:\n%s", logs.String())
			}
			s2 := newTestSink(t, cfg)
			if !runPartition(t, s2, cp, "3", events, 50, nil) {
				t.Fatal("restart did not complete")
			}
			check := func() {
				t.Helper()
				var want []int64
				for s := int64(0); s <= last; s++ {
					if _, isBad := bad[s]; !isBad {
						want = append(want, s)
					}
				}
				got := queryInts(t, dsn, `SELECT seq FROM `+table+` ORDER BY seq`)
				if !slices.Equal(got, want) {
					t.Fatalf("%d rows, want the %d not refused: %v", len(got), len(want), head(got))
				}
				ctx := testCtx(t)
				conn, err := newConn(ctx, dsn)
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close(ctx)
				rows, err := conn.Query(ctx, `SELECT sequence_number, reason, body FROM ehsink_dead_letters ORDER BY sequence_number`)
				if err != nil {
					t.Fatal(err)
				}
				seen := map[int64]int{}
				for rows.Next() {
					var seq int64
					var reason string
					var body []byte
					if err := rows.Scan(&seq, &reason, &body); err != nil {
						t.Fatal(err)
					}
					seen[seq]++
					r, isBad := bad[seq]
					switch {
					case !isBad:
						t.Errorf("dead letter for event %d, which the server takes", seq)
					case !strings.Contains(reason, r.want) || !strings.Contains(reason, "SQLSTATE 2"):
						t.Errorf("dead letter %d (%s): reason %q does not carry the server's message about %q", seq, r.name, reason, r.want)
					case string(body) != string(events[seq].Body):
						t.Errorf("dead letter %d: body %q, want %q", seq, body, events[seq].Body)
					}
				}
				if err := rows.Err(); err != nil {
					t.Fatal(err)
				}
				for seq := range bad {
					if seen[seq] != 1 {
						t.Errorf("event %d: %d dead letters, want 1", seq, seen[seq])
					}
				}
				if wm := queryInts(t, dsn, `SELECT sequence_number FROM ehsink_watermarks`); len(wm) != 1 || wm[0] != last {
					t.Fatalf("watermarks %v, want [%d]", wm, last)
				}
			}
			check()
			if got, _ := cp.get("3"); got != last {
				t.Fatalf("checkpoint %d, want %d", got, last)
			}

			delete(cp.seq, "3") // a replay from the start: the watermark covers it all
			s3 := newTestSink(t, cfg)
			if !runPartition(t, s3, cp, "3", events, 50, nil) {
				t.Fatal("replay did not complete")
			}
			check()
		})
	}
}

// TestRefusedNewestKeepsPreviousVersion: in upsert mode, when the newest
// event of a key in a flush is refused, the key's previous event of that
// flush is applied instead (and when that one is refused too, the one
// before), as if the refused events had never arrived.
func TestRefusedNewestKeepsPreviousVersion(t *testing.T) {
	dsn := newDB(t)
	cfg := upsertConfig(t, dsn) // keyed by customer: c-(seq%7)
	s := newTestSink(t, cfg)
	execSQL(t, dsn, `ALTER TABLE latest ADD CONSTRAINT amount_not_negative CHECK (amount >= 0)`)
	events := sinktest.Events("0", 0, 69)
	rule := serverRules("latest")[0]
	for _, seq := range []int64{59, 66} { // the two newest of c-3
		events[seq].Body = []byte(rule.break_(string(events[seq].Body), seq))
	}
	cp := &checkpointStore{seq: map[string]int64{}}
	if !runPartition(t, s, cp, "0", events, 70, nil) {
		t.Fatal("run did not complete")
	}
	got := queryInts(t, dsn, `SELECT seq FROM latest ORDER BY seq`)
	if want := []int64{52, 63, 64, 65, 67, 68, 69}; !slices.Equal(got, want) {
		t.Fatalf("rows hold seqs %v, want %v (c-3 at its newest event not refused, 52)", got, want)
	}
	if dl := queryInts(t, dsn, `SELECT sequence_number FROM ehsink_dead_letters ORDER BY 1`); !slices.Equal(dl, []int64{59, 66}) {
		t.Fatalf("dead letters %v, want [59 66]", dl)
	}
}

// TestRefusedRowsKeptUntilDeadLettered: Flush reports refused rows until
// they are given to DeadLetter, and never commits past them before.
func TestRefusedRowsKeptUntilDeadLettered(t *testing.T) {
	dsn := newDB(t)
	execSQL(t, dsn, appendTable)
	execSQL(t, dsn, `ALTER TABLE orders ADD CONSTRAINT amount_not_negative CHECK (amount >= 0)`)
	s := newTestSink(t, appendConfig(t, dsn))
	ctx := testCtx(t)
	w, _, err := s.Open(ctx, "0")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	events := sinktest.Events("0", 0, 9)
	events[4].Body = []byte(serverRules("orders")[0].break_(string(events[4].Body), 4))
	if err := w.Write(ctx, events); err != nil {
		t.Fatal(err)
	}
	var rej *sinks.RejectedError
	for range 2 {
		_, err := w.Flush(ctx)
		if !errors.As(err, &rej) || len(rej.Rejected) != 1 || rej.Rejected[0].Event.SequenceNumber != 4 ||
			string(rej.Rejected[0].Event.Body) != string(events[4].Body) {
			t.Fatalf("Flush = %v, want a RejectedError for seq 4 with its body", err)
		}
		if n := queryInts(t, dsn, `SELECT count(*) FROM orders`)[0]; n != 0 {
			t.Fatalf("%d rows committed with a refused row pending", n)
		}
	}
	if !strings.Contains(rej.Rejected[0].Err.Error(), "amount_not_negative") {
		t.Fatalf("reason %q does not name the constraint", rej.Rejected[0].Err)
	}
	dl := sinks.DeadLetter{Event: rej.Rejected[0].Event, Reason: rej.Rejected[0].Err.Error()}
	if err := w.(sinks.DeadLetterer).DeadLetter(ctx, []sinks.DeadLetter{dl}); err != nil {
		t.Fatal(err)
	}
	pos, err := w.Flush(ctx)
	if err != nil || pos.SequenceNumber != 9 {
		t.Fatalf("Flush = %v, %v; want watermark 9", pos, err)
	}
	if got := queryInts(t, dsn, `SELECT seq FROM orders ORDER BY rid`); !slices.Equal(got, []int64{0, 1, 2, 3, 5, 6, 7, 8, 9}) {
		t.Fatalf("rows %v", got)
	}
}

func TestPoisonCode(t *testing.T) {
	for code, want := range map[string]bool{
		"23514": true, "23502": true, "23505": true, "23503": true, "23P01": true,
		"22001": true, "22003": true, "22P02": true, "54000": true,
		"22P04": false, "42501": false, "42P01": false, "40001": false, "08006": false, "53100": false,
	} {
		if got := poisonCode(code); got != want {
			t.Errorf("poisonCode(%s) = %v, want %v", code, got, want)
		}
		if got := poisonErr(fmt.Errorf("copy: %w", &pgconn.PgError{Code: code})) != nil; got != want {
			t.Errorf("poisonErr(%s) = %v, want %v", code, got, want)
		}
	}
}
