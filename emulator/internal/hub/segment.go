package hub

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/ehsink/ehsink/internal/durable"
)

// indexEvery is the spacing, in record bytes, of a segment's sparse index.
const indexEvery = 4096

// recMeta locates one record: what the start-position predicates look at.
type recMeta struct{ seq, offset, ms int64 }

// indexEntry is one sparse index entry: the record at pos (relative to the
// segment's first record) has sequence number seq and enqueued time ms.
type indexEntry struct{ seq, pos, ms int64 }

// segment is a contiguous run of records of one partition, in memory (data)
// or in a file (f). The fields up to data are guarded by partition.mu;
// a snapshot of data[:size] or of the file range [0, size) taken under the
// lock stays valid after it is released, because records are only ever
// appended.
type segment struct {
	baseSeq    int64        // sequence number of the first record
	baseOffset int64        // offset of the first record
	count      int64        // records in the segment
	size       int64        // record bytes in the segment
	last       recMeta      // the last record, valid when count > 0
	index      []indexEntry // sparse index; index[0] is the first record
	data       []byte       // memory mode: the records, len == size

	path string   // disk mode: the segment file
	f    *os.File // disk mode: open read-write; records start at segHeaderLen

	refs     atomic.Int32 // readers using f outside partition.mu
	retired  atomic.Bool  // no longer part of the log; f is closed when refs reaches 0
	remove   bool         // with retired: delete the file too (written before retired is set)
	disposed atomic.Bool
	log      *slog.Logger
}

// note records that a record of n bytes was stored at pos.
func (s *segment) note(pos, seq, ms, n int64) {
	if s.count == 0 || pos-s.index[len(s.index)-1].pos >= indexEvery {
		s.index = append(s.index, indexEntry{seq: seq, pos: pos, ms: ms})
	}
	s.count++
	s.size = pos + n
	s.last = recMeta{seq: seq, offset: s.baseOffset + pos, ms: ms}
}

// end returns the sequence number after the segment's last record.
func (s *segment) end() int64 { return s.baseSeq + s.count }

func (s *segment) metaAt(j int) recMeta {
	e := s.index[j]
	return recMeta{seq: e.seq, offset: s.baseOffset + e.pos, ms: e.ms}
}

// seek returns the position and sequence number of the indexed record at or
// before seq, from which a reader scans forward.
func (s *segment) seek(seq int64) (pos, at int64) {
	lo, hi := 0, len(s.index)
	for lo < hi { // first entry with entry.seq > seq
		m := int(uint(lo+hi) >> 1)
		if s.index[m].seq > seq {
			hi = m
		} else {
			lo = m + 1
		}
	}
	e := s.index[max(lo-1, 0)]
	return e.pos, e.seq
}

// read returns the record bytes [pos, end). In memory mode it aliases the
// segment; on disk it reads into a new buffer.
func (s *segment) read(data []byte, pos, end int64) ([]byte, error) {
	if s.f == nil {
		return data[pos:end:end], nil
	}
	buf := make([]byte, end-pos)
	if _, err := s.f.ReadAt(buf, segHeaderLen+pos); err != nil {
		return nil, fmt.Errorf("read %s at %d: %w", s.path, segHeaderLen+pos, err)
	}
	return buf, nil
}

// acquire pins the file of a disk segment; call with partition.mu held.
func (s *segment) acquire() {
	if s.f != nil {
		s.refs.Add(1)
	}
}

// release undoes acquire; it may be called without any lock.
func (s *segment) release() {
	if s.f != nil && s.refs.Add(-1) == 0 && s.retired.Load() {
		s.dispose()
	}
}

// retire takes the segment out of the log; call with partition.mu held.
// The file is closed (and removed when remove is set) once no reader uses it.
func (s *segment) retire(remove bool) {
	s.remove = remove
	s.retired.Store(true)
	if s.refs.Load() == 0 {
		s.dispose()
	}
}

func (s *segment) dispose() {
	if s.f == nil || !s.disposed.CompareAndSwap(false, true) {
		return
	}
	if err := s.f.Close(); err != nil {
		s.log.Warn("closing segment", "file", s.path, "err", err)
	}
	if s.remove {
		if err := os.Remove(s.path); err != nil {
			s.log.Warn("removing segment", "file", s.path, "err", err)
		} else {
			s.log.Debug("removed segment", "file", s.path)
		}
	}
}

func segmentPath(dir string, baseOffset int64) string {
	return filepath.Join(dir, fmt.Sprintf("%020d.seg", baseOffset))
}

// createSegment writes a new segment file holding only its header. The file
// appears under its final name only once the header is complete (written to
// a temporary name, then renamed), so every *.seg file has a valid header.
func createSegment(dir string, h segHeader, sync bool, tab *crc32.Table, log *slog.Logger) (*segment, error) {
	path := segmentPath(dir, h.baseOffset)
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create segment: %w", err)
	}
	fail := func(err error) (*segment, error) {
		_ = f.Close()
		_ = os.Remove(tmp)
		return nil, fmt.Errorf("create segment %s: %w", path, err)
	}
	if _, err := f.Write(h.encode(tab)); err != nil {
		return fail(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			return fail(err)
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		return fail(err)
	}
	if sync {
		if err := durable.SyncDir(dir); err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("create segment %s: %w", path, err)
		}
	}
	return &segment{baseSeq: h.baseSeq, baseOffset: h.baseOffset, path: path, f: f, log: log}, nil
}

// openSegment opens an existing segment file and rebuilds its index by
// reading every record. It returns the header and, when the records end in
// a torn or corrupt record, a non-nil bad error and the position (relative
// to the first record) where the valid records end. I/O errors are err.
func openSegment(path string, tab *crc32.Table, log *slog.Logger) (s *segment, h segHeader, validEnd int64, bad, err error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, h, 0, nil, err
	}
	hb := make([]byte, segHeaderLen)
	if _, err := io.ReadFull(io.NewSectionReader(f, 0, segHeaderLen), hb); err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		_ = f.Close()
		return nil, h, 0, nil, fmt.Errorf("read header of %s: %w", path, err)
	}
	h, herr := decodeSegHeader(hb, tab)
	if herr != nil {
		_ = f.Close()
		return nil, h, 0, nil, fmt.Errorf("segment %s: %w", path, herr)
	}
	s = &segment{baseSeq: h.baseSeq, baseOffset: h.baseOffset, path: path, f: f, log: log}
	validEnd, bad, err = s.scan(tab)
	if err != nil {
		_ = f.Close()
		return nil, h, 0, nil, err
	}
	return s, h, validEnd, bad, nil
}

// scan reads all records of the file in order, filling count, size, last
// and index. It stops at the first record that is torn (errIncomplete),
// fails its checksum or breaks the sequence (errCorrupt), and returns where
// the valid records end.
func (s *segment) scan(tab *crc32.Table) (validEnd int64, bad, err error) {
	st, err := s.f.Stat()
	if err != nil {
		return 0, nil, fmt.Errorf("stat %s: %w", s.path, err)
	}
	fileRecords := st.Size() - segHeaderLen // record bytes in the file
	buf := make([]byte, min(1<<20, max(fileRecords, 64)))
	lo, hi := 0, 0 // buf[lo:hi] holds unread bytes starting at record position pos
	pos := int64(0)
	eof := false
	for {
		rec, n, derr := parseRecord(buf[lo:hi], tab, true)
		if derr == nil {
			if rec.seq != s.baseSeq+s.count {
				return pos, fmt.Errorf("%w: sequence number %d, want %d", errCorrupt, rec.seq, s.baseSeq+s.count), nil
			}
			s.note(pos, rec.seq, rec.ms, int64(n))
			lo += n
			pos += int64(n)
			continue
		}
		if !errors.Is(derr, errIncomplete) {
			return pos, derr, nil
		}
		if eof {
			if lo == hi {
				return pos, nil, nil
			}
			return pos, fmt.Errorf("%w: %d trailing bytes", errIncomplete, hi-lo), nil
		}
		if pos+int64(n) > fileRecords {
			return pos, fmt.Errorf("%w: record of %d bytes at %d, file ends at %d", errIncomplete, n, pos, fileRecords), nil
		}
		// Need more bytes: compact, grow if one record needs more, refill.
		copy(buf, buf[lo:hi])
		hi -= lo
		lo = 0
		if n > len(buf) {
			nb := make([]byte, n)
			copy(nb, buf[:hi])
			buf = nb
		}
		m, rerr := s.f.ReadAt(buf[hi:], segHeaderLen+pos+int64(hi))
		hi += m
		if errors.Is(rerr, io.EOF) {
			eof = true
		} else if rerr != nil {
			return pos, nil, fmt.Errorf("read %s: %w", s.path, rerr)
		}
	}
}
