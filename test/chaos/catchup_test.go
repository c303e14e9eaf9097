package chaos_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
	"github.com/jackc/pgx/v5"
)

// hubLast returns each partition's last enqueued sequence number, as the
// hub says (-1 for an empty partition).
func (h *harness) hubLast(ctx context.Context, hub string) (map[string]int64, error) {
	c, err := azeventhubs.NewConsumerClientFromConnectionString(h.emu.hubConn(hub), "", verifyGroup, nil)
	if err != nil {
		return nil, err
	}
	defer c.Close(context.Background())
	return h.hubLastWith(ctx, c)
}

// hubsLast is hubLast of every hub, by hub.
func (h *harness) hubsLast(ctx context.Context) (map[string]map[string]int64, error) {
	out := map[string]map[string]int64{}
	for _, hub := range []string{hubName, avroHub} {
		last, err := h.hubLast(ctx, hub)
		if err != nil {
			return nil, fmt.Errorf("hub %s: %w", hub, err)
		}
		out[hub] = last
	}
	return out, nil
}

// hubLastWith is hubLast through the client c (the partitions' monitor
// keeps one for its samples).
func (h *harness) hubLastWith(ctx context.Context, c *azeventhubs.ConsumerClient) (map[string]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out := map[string]int64{}
	for _, p := range h.parts {
		props, err := c.GetPartitionProperties(ctx, p, nil)
		if err != nil {
			return nil, fmt.Errorf("partition %s properties: %w", p, err)
		}
		out[p] = props.LastEnqueuedSequenceNumber
		if props.IsEmpty {
			out[p] = -1
		}
	}
	return out, nil
}

// progress is where a connector stands on a partition: the sink's own
// committed watermark and the checkpoint in Blob Storage.
type progress struct{ sink, ckpt int64 }

// positions reads every connector's sink watermarks and checkpoints.
func (h *harness) positions(ctx context.Context) (map[string]map[string]progress, error) {
	out, err := h.sinkPositions(ctx)
	if err != nil {
		return nil, err
	}
	for _, c := range connectors {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		cps, err := h.stores[c].ListCheckpoints(cctx, h.ns, hubOf(c), c, nil)
		cancel()
		if err != nil {
			return nil, err
		}
		for _, cp := range cps {
			if cp.SequenceNumber != nil {
				pr := out[c][cp.PartitionID]
				pr.ckpt = *cp.SequenceNumber
				out[c][cp.PartitionID] = pr
			}
		}
	}
	return out, nil
}

// sinkPositions reads every connector's sink watermarks (ckpt left at -1).
func (h *harness) sinkPositions(ctx context.Context) (map[string]map[string]progress, error) {
	out := map[string]map[string]progress{}
	for _, c := range connectors {
		out[c] = map[string]progress{}
		for _, p := range h.parts {
			out[c][p] = progress{-1, -1}
		}
	}
	conn, err := pgx.Connect(ctx, h.dsn)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT connector, partition_id, sequence_number FROM ehsink_watermarks`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var c, p string
		var seq int64
		if err := rows.Scan(&c, &p, &seq); err != nil {
			return nil, err
		}
		if m, ok := out[c]; ok {
			pr := m[p]
			pr.sink = seq
			m[p] = pr
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	files, err := parquetFiles(h.outDir)
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		if pr := out[connParquet][f.partition]; f.last > pr.sink {
			pr.sink = f.last
			out[connParquet][f.partition] = pr
		}
	}
	marks, err := h.icebergWatermarks(ctx)
	if err != nil {
		return nil, err
	}
	for p, seq := range marks {
		if pr, ok := out[connIceberg][p]; ok {
			pr.sink = seq
			out[connIceberg][p] = pr
		}
	}
	dmarks, err := h.deltaWatermarks(ctx)
	if err != nil {
		return nil, err
	}
	for p, seq := range dmarks {
		if pr, ok := out[connDelta][p]; ok {
			pr.sink = seq
			out[connDelta][p] = pr
		}
	}
	return out, nil
}

// pqFile is a visible Parquet data file, named by its sequence range.
type pqFile struct {
	path, partition string
	first, last     int64
}

// parquetFiles lists the visible data files (readers skip names starting
// with "." or "_", as Hive and Spark do).
func parquetFiles(dir string) ([]pqFile, error) {
	var out []pqFile
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), "_") {
			return filepath.SkipDir
		}
		if d.IsDir() || hidden(d.Name()) || !strings.HasSuffix(d.Name(), ".parquet") {
			return nil
		}
		f := pqFile{path: p}
		parts := strings.Split(strings.TrimSuffix(d.Name(), ".parquet"), "-")
		if len(parts) != 3 {
			return fmt.Errorf("parquet file %s: name is not PARTITION-FIRST-LAST", p)
		}
		f.partition = parts[0]
		var e1, e2 error
		f.first, e1 = strconv.ParseInt(parts[1], 10, 64)
		f.last, e2 = strconv.ParseInt(parts[2], 10, 64)
		if e1 != nil || e2 != nil {
			return fmt.Errorf("parquet file %s: name is not PARTITION-FIRST-LAST", p)
		}
		out = append(out, f)
		return nil
	})
	return out, err
}

func hidden(name string) bool { return strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") }

// waitCaughtUp waits until every connector's sink watermark and checkpoint
// reach the hub's last sequence number on every partition. Past the bound
// it records a violation naming each partition behind, then waits one more
// bound to tell a late partition from a stuck one. It returns how long the
// catch-up took after the producer stopped (or a negative duration).
func (h *harness) waitCaughtUp(producerStopped time.Time) time.Duration {
	bound := producerStopped.Add(h.k.catchUp)
	giveUp := bound.Add(h.k.catchUp)
	reported := false
	var lastBehind []string
	for {
		behind, err := h.behind()
		if err == nil && len(behind) == 0 {
			took := time.Since(producerStopped)
			fmt.Printf("every partition caught up %s after the producer stopped (bound %s)\n", took.Round(100*time.Millisecond), h.k.catchUp)
			return took
		}
		if err == nil {
			lastBehind = behind
		}
		now := time.Now()
		if now.After(bound) && !reported {
			reported = true
			h.fail("not caught up %s after the producer stopped (the bound): %s", h.k.catchUp, strings.Join(lastBehind, "; "))
		}
		if now.After(giveUp) {
			fmt.Printf("still not caught up %s after the producer stopped: %s\n", 2*h.k.catchUp, strings.Join(lastBehind, "; "))
			return -1
		}
		if !h.sleep(time.Second) {
			return -1
		}
	}
}

// behind describes every (connector, partition) not yet at the hub's end,
// with the owner of its lease.
func (h *harness) behind() ([]string, error) {
	lasts, err := h.hubsLast(h.ctx)
	if err != nil {
		return nil, err
	}
	pos, err := h.positions(h.ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, c := range connectors {
		last := lasts[hubOf(c)]
		var owners map[string]string
		for _, p := range h.parts {
			pr := pos[c][p]
			if pr.sink == last[p] && pr.ckpt == last[p] {
				continue
			}
			if owners == nil {
				owners = map[string]string{}
				owns, err := h.listOwnership(h.ctx, c)
				for _, o := range owns {
					owners[o.PartitionID] = h.ownerName(o.OwnerID)
				}
				if err != nil {
					for _, id := range h.parts {
						owners[id] = "unknown (" + err.Error() + ")"
					}
				}
			}
			owner := owners[p]
			if owner == "" {
				owner = "nobody (no lease renewed within the expiration)"
			}
			out = append(out, fmt.Sprintf("%s partition %s: sink at %d, checkpoint at %d, hub at %d, lease held by %s", c, p, pr.sink, pr.ckpt, last[p], owner))
		}
	}
	return out, nil
}
