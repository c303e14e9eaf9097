package hub

import (
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// memChunkMax bounds a memory-mode segment (chunk); retention frees memory a
// chunk at a time.
const (
	memChunkMin = 64 << 10
	memChunkMax = 1 << 20
)

// partition is one partition's log and its receivers.
type partition struct {
	hub *Hub
	id  string
	dir string // "" = memory only
	cfg *Config
	tab *crc32.Table
	log *slog.Logger

	mu          sync.Mutex // guards every field below, and the guarded fields of segs and of its receivers
	segs        []*segment // in order; the last one takes appends
	nextSeq     int64      // sequence number of the next event
	nextOffset  int64      // offset of the next event
	beginSeq    int64      // first retained sequence number (== nextSeq when none is retained)
	beginOffset int64      // offset of beginSeq (== nextOffset when none is retained)
	lastOffset  int64      // offset of the last event ever appended, -1 if none
	lastMs      int64      // enqueued time of that event (unix ms), 0 if none
	wbuf        []byte     // disk mode: encoding buffer for one Append
	dirty       bool       // disk mode: written since the last sync
	notify      chan struct{}
	groups      map[string]*group // by consumer group
	closed      bool
	failed      error // disk mode: a write could not be undone; appends are refused
}

func newPartition(h *Hub, id, dir string, cfg *Config) *partition {
	return &partition{
		hub: h, id: id, dir: dir, cfg: cfg, tab: castagnoli(),
		log:        cfg.Logger.With("hub", h.name, "partition", id),
		lastOffset: -1,
		groups:     map[string]*group{},
	}
}

func (p *partition) errorf(format string, args ...any) error {
	return fmt.Errorf("hub %q partition %s: "+format, append([]any{p.hub.name, p.id}, args...)...)
}

// load rebuilds a disk partition from its segment files. A torn or corrupt
// tail of the last segment is truncated; damage anywhere else is an error.
func (p *partition) load() error {
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return p.errorf("%w", err)
	}
	entries, err := os.ReadDir(p.dir)
	if err != nil {
		return p.errorf("%w", err)
	}
	var names []string
	for _, e := range entries {
		switch {
		case strings.HasSuffix(e.Name(), ".seg.tmp"):
			// A segment whose creation was interrupted: never part of the log.
			if err := os.Remove(filepath.Join(p.dir, e.Name())); err != nil {
				return p.errorf("%w", err)
			}
		case strings.HasSuffix(e.Name(), ".seg"):
			names = append(names, e.Name())
		}
	}
	slices.Sort(names) // zero-padded base offsets sort numerically
	for i, name := range names {
		path := filepath.Join(p.dir, name)
		s, h, validEnd, bad, err := openSegment(path, p.tab, p.log)
		if err != nil {
			return p.errorf("%w", err)
		}
		p.segs = append(p.segs, s)
		if i == 0 {
			p.nextSeq, p.nextOffset = h.baseSeq, h.baseOffset
			p.beginSeq, p.beginOffset = h.baseSeq, h.baseOffset
			p.lastOffset, p.lastMs = h.prevLastOffset, h.prevLastMs
		} else if h.baseSeq != p.nextSeq || h.baseOffset != p.nextOffset {
			return p.errorf("segment %s starts at sequence number %d offset %d, want %d and %d: %w",
				path, h.baseSeq, h.baseOffset, p.nextSeq, p.nextOffset, errCorrupt)
		}
		if bad != nil {
			if i != len(names)-1 {
				return p.errorf("segment %s at record position %d: %w", path, validEnd, bad)
			}
			p.log.Warn("truncating torn or corrupt tail of segment", "file", path, "at", segHeaderLen+validEnd, "reason", bad)
			if err := s.f.Truncate(segHeaderLen + validEnd); err != nil {
				return p.errorf("truncate %s: %w", path, err)
			}
			if err := s.f.Sync(); err != nil {
				return p.errorf("sync %s: %w", path, err)
			}
		}
		p.nextSeq, p.nextOffset = s.end(), s.baseOffset+s.size
		if s.count > 0 {
			p.lastOffset, p.lastMs = s.last.offset, s.last.ms
		}
	}
	return nil
}

// append stores msgs as consecutive events with enqueued time nowMs (or the
// previous event's time, if the clock went back).
func (p *partition) append(nowMs int64, key *string, msgs [][]byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	if p.failed != nil {
		return p.failed
	}
	if len(msgs) == 0 {
		return nil
	}
	ms := max(nowMs, p.lastMs)
	var err error
	if p.dir == "" {
		p.appendMemory(ms, key, msgs)
	} else if err = p.appendDisk(ms, key, msgs); err != nil {
		return err
	}
	if p.notify != nil {
		close(p.notify)
		p.notify = nil
	}
	if rb := p.cfg.RetentionBytes; rb > 0 && p.nextOffset-p.beginOffset > rb {
		if err := p.enforceRetentionLocked(nowMs); err != nil {
			p.log.Warn("applying retention", "err", err)
		}
	}
	return nil
}

func (p *partition) appendMemory(ms int64, key *string, msgs [][]byte) {
	var s *segment
	if n := len(p.segs); n > 0 {
		s = p.segs[n-1]
	}
	for _, m := range msgs {
		n := recordLen(key, m)
		if s == nil || len(s.data)+n > cap(s.data) {
			c := memChunkMin
			if s != nil {
				c = 2 * cap(s.data)
			}
			c = max(min(c, memChunkMax, int(p.cfg.SegmentBytes)), n)
			s = &segment{baseSeq: p.nextSeq, baseOffset: p.nextOffset, data: make([]byte, 0, c), log: p.log}
			p.segs = append(p.segs, s)
		}
		pos := int64(len(s.data))
		s.data = appendRecord(s.data, p.tab, p.nextSeq, ms, key, m)
		s.note(pos, p.nextSeq, ms, int64(n))
		p.lastOffset = p.nextOffset
		p.nextSeq++
		p.nextOffset += int64(n)
	}
	p.lastMs = ms
}

func (p *partition) appendDisk(ms int64, key *string, msgs [][]byte) error {
	var s *segment
	if n := len(p.segs); n > 0 {
		s = p.segs[n-1]
	}
	if s == nil || s.size >= p.cfg.SegmentBytes {
		var err error
		if s, err = p.rollLocked(); err != nil {
			return err
		}
	}
	p.wbuf = p.wbuf[:0]
	seq := p.nextSeq
	for _, m := range msgs {
		p.wbuf = appendRecord(p.wbuf, p.tab, seq, ms, key, m)
		seq++
	}
	at := segHeaderLen + s.size
	undo := func(cause error) error {
		if terr := s.f.Truncate(at); terr != nil {
			p.failed = p.errorf("append to %s failed (%w) and could not be undone: %w", s.path, cause, terr)
			return p.failed
		}
		return p.errorf("append to %s: %w", s.path, cause)
	}
	if _, err := s.f.WriteAt(p.wbuf, at); err != nil {
		return undo(err)
	}
	if p.cfg.Fsync == FsyncAlways {
		if err := s.f.Sync(); err != nil {
			return undo(err)
		}
	} else {
		p.dirty = true
	}
	pos := s.size
	for _, m := range msgs {
		n := int64(recordLen(key, m))
		s.note(pos, p.nextSeq, ms, n)
		p.lastOffset = p.nextOffset
		p.nextSeq++
		p.nextOffset += n
		pos += n
	}
	p.lastMs = ms
	if cap(p.wbuf) > 4<<20 {
		p.wbuf = nil
	}
	return nil
}

// rollLocked starts a new disk segment after syncing the current one.
func (p *partition) rollLocked() (*segment, error) {
	sync := p.cfg.Fsync != FsyncNever
	if n := len(p.segs); n > 0 && sync {
		if err := p.segs[n-1].f.Sync(); err != nil {
			return nil, p.errorf("sync %s: %w", p.segs[n-1].path, err)
		}
	}
	s, err := createSegment(p.dir, segHeader{
		baseSeq: p.nextSeq, baseOffset: p.nextOffset, prevLastOffset: p.lastOffset, prevLastMs: p.lastMs,
	}, sync, p.tab, p.log)
	if err != nil {
		return nil, p.errorf("%w", err)
	}
	p.log.Debug("new segment", "file", s.path, "seq", s.baseSeq, "offset", s.baseOffset)
	p.segs = append(p.segs, s)
	return s, nil
}

// findFirst returns the first stored record (retained or not yet deleted)
// for which pred is true. pred must be monotone: false for a prefix of the
// log and true for the rest (sequence numbers, offsets and enqueued times
// all increase). It reads at most one index interval of records.
func (p *partition) findFirst(pred func(recMeta) bool) (recMeta, bool, error) {
	segs := p.segs
	n := len(segs)
	if n > 0 && segs[n-1].count == 0 {
		n--
	}
	i := sort.Search(n, func(i int) bool { return pred(segs[i].last) })
	if i == n {
		return recMeta{}, false, nil
	}
	s := segs[i]
	j := sort.Search(len(s.index), func(j int) bool { return pred(s.metaAt(j)) })
	if j == 0 {
		return s.metaAt(0), true, nil
	}
	from, to := s.index[j-1].pos, s.size
	if j < len(s.index) {
		to = s.index[j].pos
	}
	b, err := s.read(s.data, from, to)
	if err != nil {
		return recMeta{}, false, p.errorf("%w", err)
	}
	for pos := from; len(b) > 0; {
		rec, n, err := parseRecord(b, p.tab, false)
		if err != nil {
			return recMeta{}, false, p.errorf("segment at offset %d position %d: %w", s.baseOffset, pos, err)
		}
		if m := (recMeta{seq: rec.seq, offset: s.baseOffset + pos, ms: rec.ms}); pred(m) {
			return m, true, nil
		}
		b = b[n:]
		pos += int64(n)
	}
	if j < len(s.index) {
		return s.metaAt(j), true, nil
	}
	return s.last, true, nil
}

// enforceRetentionLocked moves beginSeq past events older than Retention
// and past the oldest bytes beyond RetentionBytes, then retires every
// segment (but the last) that holds no retained event.
func (p *partition) enforceRetentionLocked(nowMs int64) error {
	if p.beginSeq < p.nextSeq {
		begin := recMeta{seq: p.beginSeq, offset: p.beginOffset}
		advance := func(pred func(recMeta) bool) error {
			m, ok, err := p.findFirst(pred)
			if err != nil {
				return err
			}
			if !ok {
				m = recMeta{seq: p.nextSeq, offset: p.nextOffset}
			}
			if m.seq > begin.seq {
				begin = m
			}
			return nil
		}
		if r := p.cfg.Retention; r > 0 {
			cutoff := nowMs - r.Milliseconds()
			if err := advance(func(m recMeta) bool { return m.ms > cutoff }); err != nil {
				return err
			}
		}
		if rb := p.cfg.RetentionBytes; rb > 0 && p.nextOffset-begin.offset > rb {
			low := p.nextOffset - rb
			if err := advance(func(m recMeta) bool { return m.offset >= low }); err != nil {
				return err
			}
		}
		if begin.seq > p.beginSeq {
			p.log.Debug("retention", "begin_seq", begin.seq)
			p.beginSeq, p.beginOffset = begin.seq, begin.offset
		}
	}
	k := 0
	for k < len(p.segs)-1 && p.segs[k].end() <= p.beginSeq {
		p.segs[k].retire(true)
		k++
	}
	if k > 0 {
		p.segs = slices.Clone(p.segs[k:])
	}
	return nil
}

// syncIfDirty syncs the active segment file if it has unsynced records.
func (p *partition) syncIfDirty() error {
	p.mu.Lock()
	if !p.dirty || p.closed || len(p.segs) == 0 {
		p.mu.Unlock()
		return nil
	}
	s := p.segs[len(p.segs)-1]
	p.dirty = false
	s.acquire()
	p.mu.Unlock()
	defer s.release()
	if err := s.f.Sync(); err != nil {
		return p.errorf("sync %s: %w", s.path, err)
	}
	return nil
}

// properties returns the partition's runtime properties.
func (p *partition) properties() PartitionProperties {
	p.mu.Lock()
	defer p.mu.Unlock()
	pp := PartitionProperties{
		BeginSequenceNumber:        p.beginSeq,
		LastEnqueuedSequenceNumber: p.nextSeq - 1,
		LastEnqueuedOffset:         strconv.FormatInt(p.lastOffset, 10),
		LastEnqueuedTime:           time.UnixMilli(p.lastMs).UTC(),
		IsEmpty:                    p.beginSeq >= p.nextSeq,
	}
	return pp
}

// close detaches every receiver (with ErrClosed, without OnDetach), wakes
// waiting readers, syncs and closes the segment files.
func (p *partition) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	for _, g := range p.groups {
		for _, r := range g.all() {
			r.detachLocked(ErrClosed)
		}
	}
	if p.notify != nil {
		close(p.notify)
		p.notify = nil
	}
	var err error
	if n := len(p.segs); n > 0 && p.dir != "" && p.dirty && p.cfg.Fsync != FsyncNever {
		if serr := p.segs[n-1].f.Sync(); serr != nil {
			err = p.errorf("sync %s: %w", p.segs[n-1].path, serr)
		}
	}
	for _, s := range p.segs {
		s.retire(false)
	}
	return err
}
