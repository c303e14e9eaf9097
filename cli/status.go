package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ehsink/ehsink/internal/connector"
	"github.com/ehsink/ehsink/internal/ops"
)

const statusUsage = `Usage: ehsink status [--addr HOST:PORT] [--watch] [--interval 2s]

Prints the state of the connectors of a running 'ehsink run', read from its
operations API (GET /v1/connectors): per connector its state, and per
partition this replica owns: the owner, the sink's watermark, the last
checkpoint, the last enqueued sequence number, the lag in events and in
time, and the commit rate. Each replica reports the partitions it owns; ask
each one (or sum ehsink_partition_lag_events in Prometheus).

--watch redraws the table every --interval until interrupted; the rate
column needs two samples, so it shows "-" on the first.

Exit status: 0 ok, 1 the API could not be read, 2 bad usage.
`

// runStatus is `ehsink status`.
func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet(ctx, "status", statusUsage)
	addr := fs.String("addr", ops.DefaultAddr, "the operations API `HOST:PORT` of the replica (http.listen or --http of ehsink run)")
	watch := fs.Bool("watch", false, "redraw the table every --interval until interrupted")
	every := fs.Duration("interval", 2*time.Second, "redraw `interval` with --watch")
	if code, ok := fs.parse(args, stdout, stderr); !ok {
		return code
	}
	if *every <= 0 {
		fmt.Fprintln(stderr, "ehsink status: --interval must be positive")
		return exitUsage
	}
	base := *addr
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	client := &http.Client{Timeout: 10 * time.Second}
	var prev *statusSample
	for {
		sample, err := fetchStatus(ctx, client, base)
		if err != nil {
			if ctx.Err() != nil {
				return exitOK
			}
			fmt.Fprintf(stderr, "ehsink status: %v\n", err)
			return exitFailure
		}
		if *watch {
			fmt.Fprint(stdout, "\x1b[H\x1b[2J") // home and clear: redraw in place
			fmt.Fprintf(stdout, "%s  %s  every %s\n\n", base, sample.at.Format(time.TimeOnly), *every)
		}
		printStatus(stdout, sample, prev)
		if !*watch {
			return exitOK
		}
		prev = &sample
		t := time.NewTimer(*every)
		select {
		case <-ctx.Done():
			t.Stop()
			return exitOK
		case <-t.C:
		}
	}
}

// statusSample is one read of /v1/connectors.
type statusSample struct {
	at         time.Time
	connectors []connector.ConnectorStatus
}

func fetchStatus(ctx context.Context, client *http.Client, base string) (statusSample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/connectors", nil)
	if err != nil {
		return statusSample{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return statusSample{}, fmt.Errorf("GET /v1/connectors: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return statusSample{}, fmt.Errorf("GET /v1/connectors: %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	var body struct {
		Connectors []connector.ConnectorStatus `json:"connectors"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return statusSample{}, fmt.Errorf("GET /v1/connectors: %w", err)
	}
	return statusSample{at: time.Now(), connectors: body.Connectors}, nil
}

// printStatus writes the table; prev, when given, is the sample the
// events/s column is computed against.
func printStatus(w io.Writer, cur statusSample, prev *statusSample) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CONNECTOR\tSTATE\tPARTITION\tOWNER\tWATERMARK\tCHECKPOINT\tLAST ENQUEUED\tLAG\tLAG TIME\tEVENTS/S")
	for _, c := range cur.connectors {
		state := string(c.State)
		if why := c.NotReady(); why != "" && c.State != connector.StateFailed {
			state += " (" + why + ")"
		} else if c.LastError != nil && c.State == connector.StateFailed {
			state += ": " + c.LastError.Message
		}
		if len(c.Partitions) == 0 {
			fmt.Fprintf(tw, "%s\t%s\t-\t%s\t-\t-\t-\t-\t-\t-\n", c.Name, state, orDash(c.OwnerID))
			continue
		}
		for _, p := range c.Partitions {
			rate := "-"
			if prev != nil {
				if before, ok := committedOf(prev, c.Name, p.ID); ok {
					if secs := cur.at.Sub(prev.at).Seconds(); secs > 0 {
						rate = strconv.FormatFloat(float64(p.Committed-before)/secs, 'f', 1, 64)
					}
				}
			}
			lagTime := "-"
			if p.Lag != nil {
				lagTime = (time.Duration(p.LagSeconds * float64(time.Second))).Round(time.Second).String()
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.Name, state, p.ID, orDash(c.OwnerID),
				seqOrDash(p.Watermark), seqOrDash(p.Checkpoint), seqOrDash(p.LastEnqueued), seqOrDash(p.Lag), lagTime, rate)
		}
	}
	tw.Flush()
}

func committedOf(s *statusSample, conn, partition string) (int64, bool) {
	for _, c := range s.connectors {
		if c.Name != conn {
			continue
		}
		for _, p := range c.Partitions {
			if p.ID == partition {
				return p.Committed, true
			}
		}
	}
	return 0, false
}

func seqOrDash(v *int64) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatInt(*v, 10)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
