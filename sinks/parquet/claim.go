package parquet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/ehsink/ehsink/sinks"
)

// Claims make a commit exclusive.
//
// The fence of Flush (list the committed files, drop what another writer
// committed) leaves a window: between its list and the publication of the
// file, another owner of the partition (a steal, a paused process waking
// up) may commit an overlapping range under another name, and both would
// be visible. So before publishing, a writer claims the commit: it creates
// the object _ehsink_claims/{connector}-p{partition}/{layout}/{next}.json
// ({layout} a hash of the path template and the partition's folder, so that
// a changed template starts afresh), where next
// is the sequence number after the watermark the file extends, exclusively
// (link(2) locally, If-None-Match: * on Blob). Two writers that read the
// same watermark extend it with the same next, and only one claim can be
// created: the other writer finds someone else's claim, discards its file
// and returns sinks.ErrFenced. A claim holds the names of the data and
// dead-letter files and where their prepared bytes are (a fsynced temporary
// file, or staged blocks), so that the commit is decided by the claim:
// should its writer die before publishing, the next Open of the partition
// publishes them (rolls the commit forward), or, when the bytes are gone,
// removes the claim (rolls it back).
//
// Claims of published commits are removed, all but the newest of the
// partition (and layout): a writer removes its previous commit's claim
// once its next commit is published, and Open removes any older ones a
// crash left. The newest stays because Open, with routes, publishes its
// files again (a writer may have died between them). A removed name can be
// claimed again, by a writer paused since before that commit: its fence
// looked before the commit, and its claim now succeeds. So after creating
// its claim a writer looks at the committed files once more (checkClaim),
// and a commit that overlaps its range, necessarily published before the
// claim was removed, fences it. Only visible commits lose their claims, so
// nothing a crash left unfinished is forgotten, and the checkpoint plays
// no part: a replay behind the watermark is skipped by the writer and the
// fence, not by claims.

// claimsRoot is the folder of claims; the leading underscore hides it from
// readers that follow the Hive convention.
const claimsRoot = "_ehsink_claims"

// claimTempTag names the temporary files of local claims.
const claimTempTag = "claim"

// claimsDir is the folder of the claims of one connector's partition
// written with one path template.
func claimsDir(tag, template, prefix string) string {
	h := fnv.New64a()
	h.Write([]byte(template))
	h.Write([]byte{0})
	h.Write([]byte(prefix))
	return fmt.Sprintf("%s/%s/%016x/", claimsRoot, tag, h.Sum64())
}

// claimName is the claim of the commit that extends the watermark wm.
func (w *writer) claimName(wm *sinks.Position) string {
	next := int64(0)
	if wm != nil {
		next = wm.SequenceNumber + 1
	}
	return fmt.Sprintf("%s%020d.json", w.claims, next)
}

// claimBody is the content of a claim.
type claimBody struct {
	Writer         string `json:"writer"`
	First          int64  `json:"first_seq"`
	Last           int64  `json:"last_seq"`
	Data           string `json:"data"`
	DataRef        string `json:"data_ref"`
	DeadLetters    string `json:"dead_letters,omitempty"`
	DeadLettersRef string `json:"dead_letters_ref,omitempty"`
	// Files are the data files of the commit after Data, for a sink with
	// routes (one file per route and value of its path). Data is empty
	// when the commit has only dead letters.
	Files []claimFile `json:"files,omitempty"`
}

// claimFile is one more data file of a claimed commit.
type claimFile struct {
	Name string `json:"name"`
	Ref  string `json:"ref"`
}

// published lists the files of a claim in the order they are published:
// the dead letters, then the data files.
func (c *claimBody) published() []claimFile {
	var out []claimFile
	if c.DeadLetters != "" {
		out = append(out, claimFile{c.DeadLetters, c.DeadLettersRef})
	}
	if c.Data != "" {
		out = append(out, claimFile{c.Data, c.DataRef})
	}
	return append(out, c.Files...)
}

// claim prepares the open file (and its dead letters) and claims their
// commit. Another writer's claim on the same watermark discards the file
// and returns an error wrapping sinks.ErrFenced.
func (w *writer) claim(ctx context.Context, f *openFile, dlName string) error {
	body := claimBody{Writer: w.id, First: f.first, Last: f.last}
	var err error
	if f.dl != nil {
		body.DeadLetters = dlName
		if body.DeadLettersRef, err = f.dl.prepare(ctx, dlName); err != nil {
			return fmt.Errorf("prepare dead letters %q: %w", dlName, err)
		}
	}
	for i, df := range f.files {
		ref, err := df.data.prepare(ctx, df.name)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", df.name, err)
		}
		if i == 0 {
			body.Data, body.DataRef = df.name, ref
		} else {
			body.Files = append(body.Files, claimFile{Name: df.name, Ref: ref})
		}
	}
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	cn := w.claimName(w.watermark)
	existing, err := w.s.store.claim(ctx, cn, b)
	if err != nil {
		return err
	}
	if existing != nil {
		var other claimBody
		if err := json.Unmarshal(existing, &other); err != nil {
			return fmt.Errorf("claim %q: %w", cn, err)
		}
		if other.Writer != w.id { // not this writer's own, from a failed attempt
			w.discard()
			return fmt.Errorf("another writer claimed the commit after seq %d (its seq %d..%d, file %q): %w",
				other.First-1, other.First, other.Last, other.Data, sinks.ErrFenced)
		}
	}
	if err := w.checkClaim(ctx, f, cn); err != nil {
		return err
	}
	f.claimName = cn
	return nil
}

// checkClaim looks at the committed files after the claim cn of f was
// created: a commit that overlaps f was published by another writer while
// this one was paused between its fence and its claim, and its claim,
// which had the same name, was removed since (see above). The claim is
// then withdrawn, f discarded, and the error wraps sinks.ErrFenced.
func (w *writer) checkClaim(ctx context.Context, f *openFile, cn string) error {
	objs, err := w.list(ctx)
	if err != nil {
		return fmt.Errorf("list committed files after claim %q: %w", cn, err)
	}
	last, _ := w.newest(objs)
	if last < f.first {
		return nil
	}
	// The name was free when this writer created it, so the claim is its
	// own: nobody else's is removed.
	if err := w.s.store.remove(ctx, cn); err != nil {
		return fmt.Errorf("withdraw claim %q: %w", cn, err)
	}
	w.discard()
	return fmt.Errorf("seq %d..%d overlaps a file another writer committed up to seq %d after this writer's fence: %w",
		f.first, f.last, last, sinks.ErrFenced)
}

// removeClaim removes the claim name of a commit that is published, when
// a newer commit of the partition is published too. A failure is logged
// only: the claim is removed by a later commit or Open.
func (w *writer) removeClaim(ctx context.Context, name string) {
	if err := w.s.store.remove(ctx, name); err != nil {
		w.log.Warn("removing the claim of a published commit", "claim", name, "err", err)
	}
}

// sweepClaims removes the claims of published commits (those extending a
// watermark below wm) but the newest, which the writer's first commit
// removes: what a writer that died after its commit and before removing
// the previous claim left.
func (s *sink) sweepClaims(ctx context.Context, w *writer, wm int64) {
	objs, err := s.store.list(ctx, w.claims)
	if err != nil {
		w.log.Warn("listing claims to remove those of published commits", "err", err)
		return
	}
	var published []string
	for _, o := range objs {
		next, err := strconv.ParseInt(strings.TrimSuffix(path.Base(o.name), ".json"), 10, 64)
		if err == nil && next <= wm {
			published = append(published, o.name)
		}
	}
	if len(published) == 0 {
		return
	}
	slices.Sort(published) // zero-padded: in sequence order
	for _, name := range published[:len(published)-1] {
		w.removeClaim(ctx, name)
	}
	// The newest goes when this writer's first commit is published.
	w.lastClaim = published[len(published)-1]
}

// recoverClaims finishes the commits of the partition that were claimed
// and not published (their last sequence number is past the watermark wm
// of the visible files): each is published from its prepared bytes, or,
// when those are gone, its claim and any file it published are removed.
// It returns the watermark after them.
//
// With routes, a commit publishes several files and any of them shows its
// range: a writer that died between them leaves a watermark that looks
// complete. So the claim of the newest visible range is published again
// too (publishing a visible name changes nothing).
func (s *sink) recoverClaims(ctx context.Context, w *writer, wm int64) (int64, error) {
	objs, err := s.store.list(ctx, w.claims)
	if err != nil {
		return wm, err
	}
	slices.SortFunc(objs, func(a, b object) int { return strings.Compare(a.name, b.name) })
	newestAtWM := -1 // the claim whose range ends the visible files, with routes
	for i, o := range objs {
		next, err := strconv.ParseInt(strings.TrimSuffix(path.Base(o.name), ".json"), 10, 64)
		if err == nil && next <= wm {
			newestAtWM = i
		}
	}
	for i, o := range objs {
		// A claim that extends a watermark at or below wm was published:
		// the visible files form one chain of claims (see above). Only the
		// few past it are read.
		next, err := strconv.ParseInt(strings.TrimSuffix(path.Base(o.name), ".json"), 10, 64)
		if err == nil && next <= wm && !(s.routed() && i == newestAtWM) {
			continue
		}
		raw, err := s.store.read(ctx, o.name)
		if err != nil {
			return wm, err
		}
		var c claimBody
		if err := json.Unmarshal(raw, &c); err != nil {
			return wm, fmt.Errorf("claim %q: %w", o.name, err)
		}
		if c.Last < wm || c.Last == wm && !s.routed() {
			continue
		}
		files := c.published()
		err = nil
		for _, f := range files {
			if err = s.store.publish(ctx, f.Ref, f.Name); err != nil {
				break
			}
		}
		switch {
		case err == nil:
			if c.Last > wm {
				wm = c.Last
				w.log.Info("published a claimed commit an earlier writer left unfinished", "file", c.Data, "files", len(files), "first_seq", c.First, "last_seq", c.Last)
			}
		case errors.Is(err, errGone):
			for _, f := range files {
				if err := s.store.remove(ctx, f.Name); err != nil {
					return wm, err
				}
			}
			if err := s.store.remove(ctx, o.name); err != nil {
				return wm, err
			}
			if c.Last == wm {
				// Part of the newest range was visible: the watermark
				// goes back before it, and the replay writes it again.
				wm = c.First - 1
			}
			w.log.Info("dropped a claimed commit whose data is gone; the replay writes it again", "file", c.Data, "first_seq", c.First, "last_seq", c.Last)
		default:
			return wm, err
		}
	}
	return wm, nil
}
