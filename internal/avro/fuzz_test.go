package avro

import (
	"encoding/json"
	"testing"
)

// FuzzAppendJSON: whatever the body, a program returns valid JSON or an
// ErrBody, never panics, and leaves dst as it was on an error. Seeded with
// a valid body of every logical type and cuts of it.
func FuzzAppendJSON(f *testing.F) {
	p, err := Compile(mustParse(f, orderV1), nil)
	if err != nil {
		f.Fatal(err)
	}
	good := sample(f)
	f.Add(good)
	for _, cut := range []int{0, 1, len(good) / 3, len(good) / 2, len(good) - 1} {
		f.Add(good[:cut])
	}
	f.Add([]byte{0xfe, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, body []byte) {
		out, err := p.AppendJSON([]byte("x"), body)
		if err != nil {
			if string(out) != "x" {
				t.Fatalf("dst changed on an error: %q", out)
			}
			return
		}
		if !json.Valid(out[1:]) {
			t.Fatalf("invalid JSON %q from %x", out[1:], body)
		}
	})
}
