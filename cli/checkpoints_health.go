package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/ehsink/ehsink/checkpoint"
)

// The status column of `checkpoints list`.
const (
	statusOK      = "ok"
	statusAhead   = "AHEAD"
	statusExpired = "EXPIRED"
	statusStalled = "STALLED"
)

// health is what list says about one partition: a status and, when it is
// not ok, why.
type health struct {
	status string // "" when the hub was not reachable
	note   string
}

// assess sets the health of every row. A checkpoint past the partition's
// last event is AHEAD, one before its retained range EXPIRED. STALLED needs
// three things at once, from this one look:
//
//   - the lease is live (renewed within the ownership expiration), so no
//     other replica may take the partition;
//   - the checkpoint was last written more than stalledAfter ago (the time
//     of its blob or file: a healthy owner checkpoints every
//     checkpoint.every_interval, 20s by default, or every_events);
//   - the oldest event after the checkpoint was enqueued more than
//     stalledAfter ago: an old checkpoint on a partition that was merely
//     quiet until a moment ago is not a stall. When the newest event is
//     already that old, so are all; otherwise the event after the
//     checkpoint is read (a receiver without owner level, which takes
//     nothing from the owner).
//
// It returns why the checkpoint times could not be read, if they could not;
// STALLED is then not judged.
func (cs *checkpointSession) assess(ctx context.Context, rows []partitionRow, now time.Time) error {
	times, timesErr := cs.checkpointTimes(ctx)
	for i := range rows {
		r := &rows[i]
		p := r.props
		if p == nil {
			continue
		}
		r.health = health{status: statusOK}
		var cpSeq int64 = -1
		hasCp := r.checkpoint != nil && r.checkpoint.SequenceNumber != nil
		if hasCp {
			cpSeq = *r.checkpoint.SequenceNumber
		}
		last := p.LastEnqueuedSequenceNumber
		switch {
		case hasCp && cpSeq > last:
			r.health = health{statusAhead, fmt.Sprintf("checkpoint seq %d is past the partition's last event (seq %d): the event hub was recreated, or the checkpoint is another hub's; a reader resumes as source.on_invalid_checkpoint says", cpSeq, last)}
			continue
		case hasCp && cpSeq < p.BeginningSequenceNumber-1:
			r.health = health{statusExpired, fmt.Sprintf("events seq %d..%d (%d) were dropped by retention before they were read; the partition resumes at seq %d",
				cpSeq+1, p.BeginningSequenceNumber-1, p.BeginningSequenceNumber-1-cpSeq, p.BeginningSequenceNumber)}
			continue
		}
		lag := lagOf(*r)
		if timesErr != nil || lag == 0 || !r.owned(cs.expiration, now) {
			continue
		}
		written, ok := times[r.id]
		if hasCp && (!ok || now.Sub(written) <= cs.stalledAfter) {
			continue
		}
		oldest, ok := cs.oldestWaiting(ctx, *r, now)
		if !ok || now.Sub(oldest) <= cs.stalledAfter {
			continue
		}
		since := "never written"
		if hasCp {
			since = fmt.Sprintf("last written %s ago", now.Sub(written).Round(time.Second))
		}
		r.health = health{statusStalled, fmt.Sprintf("owner %s renewed its lease %s ago, but its checkpoint (seq %s) was %s while %d events wait, the oldest enqueued %s ago (--stalled-after %s): the owner is not moving this partition",
			r.owner.OwnerID, now.Sub(r.owner.LastModifiedTime).Round(time.Second), seqText(hasCp, cpSeq), since, lag, now.Sub(oldest).Round(time.Second), cs.stalledAfter)}
	}
	return timesErr
}

func seqText(has bool, seq int64) string {
	if !has {
		return "none"
	}
	return fmt.Sprint(seq)
}

// oldestWaiting returns the enqueued time of the first event after the
// checkpoint, or of the newest event when even that one is older than
// stalledAfter (then so are all before it).
func (cs *checkpointSession) oldestWaiting(ctx context.Context, r partitionRow, now time.Time) (time.Time, bool) {
	p := r.props
	if now.Sub(p.LastEnqueuedOn) > cs.stalledAfter {
		return p.LastEnqueuedOn, true
	}
	if cs.client == nil {
		return time.Time{}, false
	}
	next := p.BeginningSequenceNumber
	if r.checkpoint != nil && r.checkpoint.SequenceNumber != nil {
		next = max(next, *r.checkpoint.SequenceNumber+1)
	}
	ev, err := cs.readOne(ctx, r.id, azeventhubs.StartPosition{SequenceNumber: &next, Inclusive: true})
	if err != nil || ev == nil || ev.EnqueuedTime == nil {
		return time.Time{}, false
	}
	return *ev.EnqueuedTime, true
}

// checkpointTimes returns when each partition's checkpoint was last
// written: the modification time of its blob or file, which the
// CheckpointStore interface does not carry. Names are lowercase, as
// checkpoint.Lowercase writes them.
func (cs *checkpointSession) checkpointTimes(ctx context.Context) (map[string]time.Time, error) {
	rel := path.Join(strings.ToLower(cs.ns), strings.ToLower(cs.hub), strings.ToLower(cs.group), "checkpoint")
	out := map[string]time.Time{}
	spec := cs.spec.Checkpoint
	if b := spec.Blob; b != nil {
		bs, err := checkpoint.NewBlobStore(ctx, checkpoint.BlobOptions{Connection: b.Connection, AccountURL: b.AccountURL, Container: b.Container})
		if err != nil {
			return nil, err
		}
		prefix := rel + "/"
		pager := bs.Container().NewListBlobsFlatPager(&container.ListBlobsFlatOptions{Prefix: &prefix})
		for pager.More() {
			page, err := pager.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("listing checkpoint blobs: %w", err)
			}
			for _, it := range page.Segment.BlobItems {
				if it.Name != nil && it.Properties != nil && it.Properties.LastModified != nil {
					out[strings.TrimPrefix(*it.Name, prefix)] = *it.Properties.LastModified
				}
			}
		}
		return out, nil
	}
	if spec.File == nil {
		return nil, errors.New("no checkpoint store")
	}
	dir := filepath.Join(filepath.FromSlash(spec.File.Dir), filepath.FromSlash(rel))
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if e.Type().IsRegular() && !strings.HasPrefix(e.Name(), ".") {
			if info, err := e.Info(); err == nil {
				out[e.Name()] = info.ModTime()
			}
		}
	}
	return out, nil
}
