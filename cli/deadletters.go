package cli

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/ehsink/ehsink/internal/connector"
	"github.com/ehsink/ehsink/internal/deadletters"
	"github.com/ehsink/ehsink/sinks"
)

const deadlettersUsage = `Usage: ehsink deadletters list   [-c connectors.yaml] [--connector NAME] [--reason TEXT] [--since WHEN] [--replayed]
       ehsink deadletters show   [-c connectors.yaml] [--connector NAME] ID
       ehsink deadletters replay [-c connectors.yaml] [--connector NAME] [--reason TEXT] [--since WHEN] [--id ID]... [--dry-run]

Reads the dead letters a connector's sink keeps (the PostgreSQL sink's
ehsink_dead_letters table, the Iceberg and Delta sinks' dead-letter tables,
the Parquet sink's _dead_letters files) or the runner's dead-letter files
(errors.dead_letter.dir) of a sink that keeps none (stdout, custom sinks),
and replays them once their cause is fixed.

list counts the letters not yet replayed by connector, partition and
reason (--replayed counts the replayed ones too). show prints one letter:
the event as received, its body decoded as the connector's format allows,
why it was refused and by which configuration revision (a hash of the
connector's spec; 'ehsink deadletters show' prints the current one).

replay runs the selected letters' events through the connector's current
filter, routes and mapping, and writes their rows into its sink. Each
letter is marked replayed in the commit that writes its rows, so a replay
stopped at any moment and run again writes each row once: in its
transaction for PostgreSQL, its commit for Iceberg and Delta; for other
sinks the event is written through a writer of its own partition,
deadletter.<partition>.<sequence number>, whose commit is the mark. A
letter whose event fails again stays, with its new reason (its old one in
files). Replay leaves the
partitions' watermarks alone and may run beside a live connector; an
upsert keeps the newer row of a key when the replayed event is older.
--dry-run prints, per letter, the rows it would write or why it would fail
again, and writes nothing.

--since is an RFC 3339 time or a duration back from now (24h). Filters
select letters: --reason by a substring of the reason, --since by when
they failed, --id by id (repeatable). Without --connector, every connector
of the file whose sink keeps its dead letters where these commands read
them.

Exit status: 0 ok (replay: every selected letter replayed), 1 a failure
or, for replay, a letter that failed again, 2 bad usage or an invalid
config.
`

// runDeadletters is `ehsink deadletters`.
func runDeadletters(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, verb, code, ok := actionFlagSet(ctx, "deadletters", deadlettersUsage, []string{"list", "show", "replay"}, args, stdout, stderr)
	if !ok {
		return code
	}
	var (
		path     = fs.String("c", "connectors.yaml", "the config `file`")
		name     = fs.String("connector", "", "only connector `NAME`")
		reason   = fs.String("reason", "", "list, replay: letters whose reason contains `TEXT`")
		since    = fs.String("since", "", "list, replay: letters that failed since `WHEN` (RFC 3339 time, or a duration such as 24h)")
		replayed = fs.Bool("replayed", false, "list: count the replayed letters too")
		dryRun   = fs.Bool("dry-run", false, "replay: print what would happen, write nothing")
		ids      stringList
	)
	fs.Var(&ids, "id", "replay: only letter `ID` (repeatable)")
	usage := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "ehsink deadletters %s: "+format+"\n", append([]any{verb}, a...)...)
		return exitUsage
	}
	rest := args[1:]
	var showID string
	if verb == "show" && len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		showID, rest = rest[0], rest[1:] // show ID [flags]
	}
	if err := fs.Parse(rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.printUsage(stdout)
			return exitOK
		}
		return usage("%v", err)
	}
	if verb == "show" && showID == "" && fs.NArg() == 1 {
		showID = fs.Arg(0) // show [flags] ID
	} else if fs.NArg() > 0 {
		return usage("unexpected argument %q", fs.Arg(0))
	}
	f := deadletters.Filter{Reason: *reason, Replayed: *replayed}
	switch {
	case verb == "show" && showID == "":
		return usage("the letter's ID is required")
	case verb != "list" && *replayed:
		return usage("--replayed goes with list")
	case verb != "replay" && (*dryRun || len(ids) > 0):
		return usage("--dry-run and --id go with replay")
	case verb == "show" && (*reason != "" || *since != ""):
		return usage("--reason and --since go with list and replay")
	}
	if *since != "" {
		var err error
		if f.Since, err = deadletters.ParseSince(*since, time.Now()); err != nil {
			return usage("--since: %v", err)
		}
	}
	var letterIDs []int64
	for _, s := range append(ids, showID) {
		if s == "" {
			continue
		}
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil || id <= 0 {
			return usage("letter ID %q: want a positive integer", s)
		}
		letterIDs = append(letterIDs, id)
	}
	cfg, err := connector.Load(*path, connector.LoadOptions{Ignore: unusedByTest})
	if err != nil {
		printProblems(stderr, *path, err)
		return exitUsage
	}
	specs := make([]*connector.Spec, 0, len(cfg.Connectors))
	switch {
	case *name != "" || verb == "show":
		spec, err := pickConnector(cfg, *name)
		if err != nil {
			return usage("%v", err)
		}
		specs = append(specs, spec)
	default:
		for i := range cfg.Connectors {
			specs = append(specs, &cfg.Connectors[i])
		}
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	code = exitOK
	var counts []deadletters.Count
	for _, spec := range specs {
		store, closeStore, err := openLetterStore(ctx, spec, log)
		if errors.Is(err, errNoLetterStore) && *name == "" && verb != "show" {
			fmt.Fprintf(stderr, "ehsink deadletters: connector %q: %v\n", spec.Name, err)
			continue
		}
		if err != nil {
			fmt.Fprintf(stderr, "ehsink deadletters %s: connector %q: %s\n", verb, spec.Name, redact(err.Error()))
			return exitFailure
		}
		err = func() error {
			defer closeStore()
			switch verb {
			case "list":
				c, err := store.Counts(ctx, f)
				counts = append(counts, c...)
				return err
			case "show":
				f.ID, f.Replayed = letterIDs[0], true
				return showLetter(ctx, store, spec, f, stdout)
			}
			failed, err := replayLetters(ctx, store, spec, f, letterIDs, *dryRun, stdout)
			if failed {
				code = exitFailure
			}
			return err
		}()
		if err != nil {
			fmt.Fprintf(stderr, "ehsink deadletters %s: connector %q: %s\n", verb, spec.Name, redact(err.Error()))
			return exitFailure
		}
	}
	if verb == "list" {
		printCounts(stdout, counts)
	}
	return code
}

// errNoLetterStore is openLetterStore's error for a sink whose dead letters
// these commands cannot read.
var errNoLetterStore = errors.New("its sink keeps no dead letters where these commands read them (the postgres, iceberg and delta sinks' tables, the parquet sink's files, and the runner's dead-letter files of sinks that keep none)")

// openLetterStore builds spec's sink, as run does but reading no event
// hub, and returns it as a dead-letter store.
func openLetterStore(ctx context.Context, spec *connector.Spec, log *slog.Logger) (deadletters.Store, func(), error) {
	driver, err := (*sinks.Registry)(nil).Lookup(spec.Sink.Type)
	if err != nil {
		return nil, nil, err
	}
	cfg := spec.Sink.Config
	if cfg == nil {
		cfg = driver.NewConfig()
	}
	// The sink is told what the running connector's is (the event hub
	// may come from the connection string's EntityPath), so that it reads
	// the same letters.
	info, err := connector.SinkInfo(*spec, log.With("connector", spec.Name))
	if err != nil {
		return nil, nil, fmt.Errorf("source.connection: %w", err)
	}
	sink, err := driver.New(ctx, cfg, info)
	if err != nil {
		return nil, nil, err
	}
	closeSink := func() { _ = sink.Close(context.WithoutCancel(ctx)) }
	_, stores := sink.(deadletters.Store)
	_, keeps := sink.(deadletters.Source)
	// The runner stores the letters of a sink that does not keep them
	// itself in the connector's dead-letter files; a sink that keeps them
	// elsewhere (iceberg) leaves that folder unmade.
	if dir := spec.Errors.DeadLetter.Dir; !stores && !keeps {
		if _, err := os.Stat(dir); err != nil {
			closeSink()
			return nil, nil, fmt.Errorf("sink type %s, no dead-letter files in %s: %w", spec.Sink.Type, dir, errNoLetterStore)
		}
	}
	return connector.LetterStore(sink, spec), closeSink, nil
}

// printCounts prints list's table.
func printCounts(w io.Writer, counts []deadletters.Count) {
	if len(counts) == 0 {
		fmt.Fprintln(w, "no dead letters")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CONNECTOR\tPARTITION\tLETTERS\tREPLAYED\tFIRST\tLAST\tREASON")
	var total int64
	for _, c := range counts {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\n", c.Connector, c.Partition, c.Letters, c.Replayed,
			c.First.UTC().Format(time.RFC3339), c.Last.UTC().Format(time.RFC3339), oneLine(c.Reason))
		total += c.Letters
	}
	tw.Flush()
	fmt.Fprintf(w, "%d letter(s)\n", total)
}

// oneLine keeps a reason on its table row.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// showLetter prints the letter f selects.
func showLetter(ctx context.Context, store deadletters.Store, spec *connector.Spec, f deadletters.Filter, w io.Writer) error {
	letters, err := store.Letters(ctx, f)
	if err != nil {
		return err
	}
	if len(letters) == 0 {
		return fmt.Errorf("no letter %d", f.ID)
	}
	l := &letters[0]
	ev := &l.Event
	fmt.Fprintf(w, "letter %d (connector %s, table %s)\n", l.ID, l.Connector, l.Table)
	fmt.Fprintf(w, "partition:       %s\nsequence number: %d\noffset:          %s\n", ev.Partition, ev.SequenceNumber, ev.Offset)
	if !ev.EnqueuedTime.IsZero() {
		fmt.Fprintf(w, "enqueued:        %s\n", ev.EnqueuedTime.Format(time.RFC3339Nano))
	}
	if ev.PartitionKey != nil {
		fmt.Fprintf(w, "partition key:   %s\n", *ev.PartitionKey)
	}
	if ev.ContentType != nil {
		fmt.Fprintf(w, "content type:    %s\n", *ev.ContentType)
	}
	if len(ev.Properties) > 0 {
		p, _ := json.Marshal(ev.Properties)
		fmt.Fprintf(w, "properties:      %s\n", p)
	}
	fmt.Fprintf(w, "failed at:       %s\n", l.FailedAt.UTC().Format(time.RFC3339Nano))
	rev := l.Revision
	if rev == "" {
		rev = "unknown"
	}
	fmt.Fprintf(w, "revision:        %s (the file's now: %s)\n", rev, spec.Revision())
	switch {
	case l.ReplayedAt != nil && l.ReplayedAt.IsZero():
		fmt.Fprintln(w, "replayed:        yes (its sink keeps no time)")
	case l.ReplayedAt != nil:
		fmt.Fprintf(w, "replayed at:     %s\n", l.ReplayedAt.UTC().Format(time.RFC3339Nano))
	}
	fmt.Fprintf(w, "reason:          %s\n", l.Reason)
	kind, body := showBody(spec, ev.Body)
	fmt.Fprintf(w, "body (%s, %d bytes):\n%s\n", kind, len(ev.Body), body)
	return nil
}

// showBody renders a body as the connector's format allows: JSON indented,
// other text as is, anything else (Avro bytes) in base64.
func showBody(spec *connector.Spec, b []byte) (kind, text string) {
	if spec.Source.Format != "avro" && json.Valid(b) {
		var out bytes.Buffer
		if json.Indent(&out, b, "", "  ") == nil {
			return "json", out.String()
		}
	}
	if spec.Source.Format != "avro" && utf8.Valid(b) {
		return "text", string(b)
	}
	return "base64", base64.StdEncoding.EncodeToString(b)
}

// replayLetters replays the letters of spec's store that f and ids select,
// printing each outcome and a summary. failed reports a letter that failed
// again.
func replayLetters(ctx context.Context, store deadletters.Store, spec *connector.Spec, f deadletters.Filter, ids []int64, dryRun bool, w io.Writer) (failed bool, err error) {
	dec, err := connector.ReplayDecoder(spec)
	if err != nil {
		return false, err
	}
	// In a dry run each outcome is said as what would happen.
	said := func(done, would string) string {
		if dryRun {
			return would
		}
		return done
	}
	r := connector.LetterReplayer(spec, store, dec)
	r.Report = func(l *deadletters.Letter, out deadletters.Outcome) {
		fmt.Fprintf(w, "letter %d (partition %s, sequence number %d): ", l.ID, l.Event.Partition, l.Event.SequenceNumber)
		switch {
		case out.AlreadyReplayed:
			fmt.Fprintln(w, "already replayed")
		case out.Reason != "":
			fmt.Fprintf(w, "%s: %s\n", said("failed again", "would fail again"), out.Reason)
		case out.Dropped && out.Unmarked:
			fmt.Fprintln(w, said("dropped by the filter (no row; its sink cannot mark it, so a later replay drops it again)", "would be dropped by the filter (no row)"))
		case out.Dropped:
			fmt.Fprintln(w, said("dropped by the filter (marked replayed, no row)", "would be dropped by the filter (no row)"))
		default:
			fmt.Fprintf(w, "%s: %d row(s)\n", said("replayed", "would be replayed"), len(out.Rows))
			for _, r := range out.Rows {
				fmt.Fprintf(w, "  %s %s\n", r.Table, formatRow(r))
			}
		}
	}
	t, err := r.Replay(ctx, f, ids, dryRun)
	if err != nil {
		return t.FailedAgain > 0, err
	}
	verb := "replayed"
	if dryRun {
		verb = "would be replayed (dry run: nothing written)"
	}
	fmt.Fprintf(w, "connector %s: %d letter(s): %d %s, %d dropped by the filter, %d failed again, %d already replayed\n",
		spec.Name, t.Letters, t.Replayed, verb, t.Dropped, t.FailedAgain, t.AlreadyReplayed)
	return t.FailedAgain > 0, nil
}

// formatRow prints a row as {column: value, ...}.
func formatRow(r deadletters.Row) string {
	var b strings.Builder
	if r.Delete {
		b.WriteString("delete ")
	}
	b.WriteByte('{')
	for i, c := range r.Columns {
		if r.Delete && r.Values[i] == nil {
			continue
		}
		if b.Len() > 1 && !strings.HasSuffix(b.String(), "{") {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s: %v", c, formatValue(r.Values[i]))
	}
	b.WriteByte('}')
	return b.String()
}

// formatValue prints one mapped value.
func formatValue(v any) any {
	switch v := v.(type) {
	case nil:
		return "null"
	case string:
		return strconv.Quote(v)
	case time.Time:
		return v.UTC().Format(time.RFC3339Nano)
	case json.RawMessage:
		return string(v)
	case []byte:
		return base64.StdEncoding.EncodeToString(v)
	}
	return v
}
