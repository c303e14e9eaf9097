package hub

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
)

// Record framing, shared by memory and disk storage (all integers little endian):
//
//	[0:4]   n       uint32, length of the rest of the record (crc .. end)
//	[4:8]   crc     CRC-32C (Castagnoli) of bytes [8:4+n]
//	[8:16]  seq     int64 sequence number
//	[16:24] ms      int64 enqueued time, unix milliseconds
//	[24:26] keyLen  uint16, 0xFFFF = no partition key
//	[26:..] key     keyLen bytes
//	[..:4+n] message (the encoded inner AMQP message, verbatim)
//
// A record's offset is the byte position of its first byte in the partition's
// record stream (segment base offset + position inside the segment).
const (
	recHeaderLen  = 26
	recNoKey      = 0xFFFF
	recMaxLen     = 1 << 30 // sanity bound on n; larger means corruption
	recMinBodyLen = recHeaderLen - 4
)

// errIncomplete: the buffer ends inside a record (need more bytes, or a torn tail).
var errIncomplete = errors.New("incomplete record")

// errCorrupt: the bytes cannot be a record written by this package.
var errCorrupt = errors.New("corrupt record")

// record is a decoded record. key and msg alias the decoded buffer.
type record struct {
	seq    int64
	ms     int64
	hasKey bool
	key    []byte
	msg    []byte
}

func castagnoli() *crc32.Table { return crc32.MakeTable(crc32.Castagnoli) }

// recordLen returns the encoded length of a record.
func recordLen(key *string, msg []byte) int {
	n := recHeaderLen + len(msg)
	if key != nil {
		n += len(*key)
	}
	return n
}

// appendRecord appends the encoded record to dst. len(*key) must be at most
// MaxPartitionKeyLen.
func appendRecord(dst []byte, tab *crc32.Table, seq, ms int64, key *string, msg []byte) []byte {
	start := len(dst)
	n := recordLen(key, msg)
	dst = slices.Grow(dst, n)[:start+recHeaderLen]
	h := dst[start:]
	binary.LittleEndian.PutUint32(h[0:4], uint32(n-4))
	binary.LittleEndian.PutUint64(h[8:16], uint64(seq))
	binary.LittleEndian.PutUint64(h[16:24], uint64(ms))
	if key == nil {
		binary.LittleEndian.PutUint16(h[24:26], recNoKey)
	} else {
		binary.LittleEndian.PutUint16(h[24:26], uint16(len(*key)))
		dst = append(dst, *key...)
	}
	dst = append(dst, msg...)
	binary.LittleEndian.PutUint32(dst[start+4:start+8], crc32.Checksum(dst[start+8:], tab))
	return dst
}

// decodeRecord decodes the record at the start of b and returns it with its
// encoded length. It verifies the checksum. If b ends inside the record it
// returns errIncomplete and, when the length prefix is readable, the full
// length needed; any other malformation is errCorrupt. It never panics.
func decodeRecord(b []byte) (record, int, error) {
	return parseRecord(b, castagnoli(), true)
}

func parseRecord(b []byte, tab *crc32.Table, verify bool) (record, int, error) {
	if len(b) < 4 {
		return record{}, 0, errIncomplete
	}
	n := binary.LittleEndian.Uint32(b[0:4])
	if n < recMinBodyLen || n > recMaxLen {
		return record{}, 0, fmt.Errorf("%w: length %d", errCorrupt, n)
	}
	total := int(n) + 4
	if len(b) < total {
		return record{}, total, errIncomplete
	}
	r := b[:total]
	if verify {
		if got, want := crc32.Checksum(r[8:], tab), binary.LittleEndian.Uint32(r[4:8]); got != want {
			return record{}, 0, fmt.Errorf("%w: checksum %08x, want %08x", errCorrupt, got, want)
		}
	}
	rec := record{
		seq: int64(binary.LittleEndian.Uint64(r[8:16])),
		ms:  int64(binary.LittleEndian.Uint64(r[16:24])),
	}
	kl := int(binary.LittleEndian.Uint16(r[24:26]))
	body := r[recHeaderLen:]
	if kl != recNoKey {
		if kl > len(body) {
			return record{}, 0, fmt.Errorf("%w: key length %d exceeds record", errCorrupt, kl)
		}
		rec.hasKey = true
		rec.key = body[:kl:kl]
		body = body[kl:]
	}
	rec.msg = body[:len(body):len(body)]
	return rec, total, nil
}

// Segment file header: magic, then the state of the partition just before the
// segment's first record, then a CRC-32C of the preceding 40 bytes. It lets a
// partition be rebuilt even when retention removed every older segment.
const (
	segMagic     = "EHSEG\x00\x01\x00"
	segHeaderLen = 44
)

type segHeader struct {
	baseSeq        int64 // sequence number of the segment's first record
	baseOffset     int64 // offset of the segment's first record
	prevLastOffset int64 // offset of the partition's last record before this segment, -1 if none
	prevLastMs     int64 // enqueued time of that record, 0 if none
}

func (h segHeader) encode(tab *crc32.Table) []byte {
	b := make([]byte, segHeaderLen)
	copy(b, segMagic)
	binary.LittleEndian.PutUint64(b[8:], uint64(h.baseSeq))
	binary.LittleEndian.PutUint64(b[16:], uint64(h.baseOffset))
	binary.LittleEndian.PutUint64(b[24:], uint64(h.prevLastOffset))
	binary.LittleEndian.PutUint64(b[32:], uint64(h.prevLastMs))
	binary.LittleEndian.PutUint32(b[40:], crc32.Checksum(b[:40], tab))
	return b
}

func decodeSegHeader(b []byte, tab *crc32.Table) (segHeader, error) {
	if len(b) < segHeaderLen {
		return segHeader{}, fmt.Errorf("%w: short segment header (%d bytes)", errCorrupt, len(b))
	}
	if string(b[:8]) != segMagic {
		return segHeader{}, fmt.Errorf("%w: bad segment magic", errCorrupt)
	}
	if crc32.Checksum(b[:40], tab) != binary.LittleEndian.Uint32(b[40:]) {
		return segHeader{}, fmt.Errorf("%w: segment header checksum", errCorrupt)
	}
	return segHeader{
		baseSeq:        int64(binary.LittleEndian.Uint64(b[8:])),
		baseOffset:     int64(binary.LittleEndian.Uint64(b[16:])),
		prevLastOffset: int64(binary.LittleEndian.Uint64(b[24:])),
		prevLastMs:     int64(binary.LittleEndian.Uint64(b[32:])),
	}, nil
}
