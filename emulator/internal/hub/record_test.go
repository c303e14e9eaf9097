package hub

import (
	"bytes"
	"errors"
	"testing"
)

func TestRecordRoundTrip(t *testing.T) {
	tab := castagnoli()
	for _, tt := range []struct {
		key *string
		msg []byte
	}{
		{nil, nil},
		{nil, []byte("m")},
		{ptr(""), []byte("message")},
		{ptr("partition-key"), bytes.Repeat([]byte{0xAB}, 70000)},
	} {
		b := appendRecord([]byte("prefix"), tab, 42, 1767323045678, tt.key, tt.msg)[len("prefix"):]
		if len(b) != recordLen(tt.key, tt.msg) {
			t.Fatalf("encoded %d bytes, recordLen %d", len(b), recordLen(tt.key, tt.msg))
		}
		rec, n, err := decodeRecord(append(b, "trailing"...))
		if err != nil || n != len(b) {
			t.Fatalf("decode: n=%d err=%v", n, err)
		}
		if rec.seq != 42 || rec.ms != 1767323045678 || rec.hasKey != (tt.key != nil) || !bytes.Equal(rec.msg, tt.msg) ||
			(tt.key != nil && string(rec.key) != *tt.key) {
			t.Fatalf("decoded %+v", rec)
		}
		for cut := 0; cut < len(b); cut++ {
			if _, _, err := decodeRecord(b[:cut]); !errors.Is(err, errIncomplete) {
				t.Fatalf("cut at %d: %v, want errIncomplete", cut, err)
			}
		}
		for i := 4; i < len(b); i += 1 + len(b)/50 {
			c := bytes.Clone(b)
			c[i] ^= 1
			if _, _, err := decodeRecord(c); !errors.Is(err, errCorrupt) {
				t.Fatalf("flip at %d: %v, want errCorrupt", i, err)
			}
		}
	}
}

func FuzzDecodeRecord(f *testing.F) {
	tab := castagnoli()
	f.Add(appendRecord(nil, tab, 0, 0, nil, []byte("hello")))
	f.Add(appendRecord(nil, tab, 7, 1767323045678, ptr("key"), []byte("hello")))
	f.Add(appendRecord(nil, tab, -1, -1, ptr(""), nil))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{22, 0, 0, 0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, n, err := decodeRecord(b)
		if err != nil {
			if !errors.Is(err, errIncomplete) && !errors.Is(err, errCorrupt) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		if n < recHeaderLen || n > len(b) {
			t.Fatalf("n = %d for %d bytes", n, len(b))
		}
		// A valid record re-encodes to the same bytes.
		var key *string
		if rec.hasKey {
			key = ptr(string(rec.key))
		}
		if again := appendRecord(nil, tab, rec.seq, rec.ms, key, rec.msg); !bytes.Equal(again, b[:n]) {
			t.Fatalf("re-encoding differs")
		}
	})
}
