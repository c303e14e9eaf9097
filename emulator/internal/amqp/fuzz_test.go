package amqp

import "testing"

// FuzzDecode checks that arbitrary bytes never panic the value decoder and
// that whatever decodes re-encodes to something that decodes again.
func FuzzDecode(f *testing.F) {
	for _, tc := range valueCases {
		b, err := Append(nil, tc.v)
		if err != nil {
			f.Fatal(err)
		}
		if len(b) < 4096 {
			f.Add(b)
		}
	}
	for _, tc := range malformedValues {
		f.Add(tc.b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, _, err := Decode(b)
		_, _ = Skip(b)
		if err != nil {
			return
		}
		enc, err := Append(nil, v)
		if err != nil {
			return // e.g. an array whose elements re-encode differently
		}
		if _, _, err := Decode(enc); err != nil {
			t.Fatalf("re-encoded value does not decode: %v", err)
		}
	})
}

// FuzzFrames feeds arbitrary bytes, split in two at an arbitrary point,
// through the frame splitter and performative decoder.
func FuzzFrames(f *testing.F) {
	for _, tc := range performativeCases {
		b, err := AppendFrame(nil, tc.frameType, 0, tc.p, tc.payload)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, uint16(len(b)/2))
	}
	for _, tc := range malformedBodies {
		b := append([]byte{0, 0, 0, 0, 2, tc.frameType, 0, 0}, tc.b...)
		b[3] = byte(len(b))
		f.Add(b, uint16(3))
	}
	f.Fuzz(func(t *testing.T, b []byte, cut uint16) {
		c := int(cut) % (len(b) + 1)
		var buf []byte
		for _, chunk := range [][]byte{b[:c], b[c:]} {
			buf = append(buf, chunk...)
			for {
				fr, n, err := NextFrame(buf, 1<<16)
				if err != nil || n == 0 {
					break
				}
				if len(fr.Body) > 0 {
					_, _, _ = DecodeBody(fr.Header.Type, fr.Body)
				}
				buf = buf[n:]
			}
		}
		_, _ = Sections(b)
		_, _ = AppendWithAnnotations(nil, b, Map{{Key: Symbol("x"), Value: int64(1)}})
	})
}
