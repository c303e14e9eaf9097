package avro

import (
	"encoding/json"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
)

const orderV1 = `{"type":"record","name":"Order","namespace":"shop","fields":[
 {"name":"id","type":"long"},
 {"name":"customer","type":{"type":"record","name":"Customer","fields":[{"name":"name","type":"string"},{"name":"tier","type":{"type":"enum","name":"Tier","symbols":["GOLD","SILVER"],"default":"SILVER"}}]}},
 {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":12,"scale":2}},
 {"name":"placed","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"placed_us","type":{"type":"long","logicalType":"timestamp-micros"}},
 {"name":"day","type":{"type":"int","logicalType":"date"}},
 {"name":"ref","type":{"type":"string","logicalType":"uuid"}},
 {"name":"note","type":["null","string"],"default":null},
 {"name":"tags","type":{"type":"array","items":"string"}},
 {"name":"attrs","type":{"type":"map","values":"int"}},
 {"name":"blob","type":"bytes"},
 {"name":"ratio","type":"double"},
 {"name":"legacy","type":"string"}
]}`

// orderV2 adds a field with a default, drops legacy, and promotes nothing.
const orderV2 = `{"type":"record","name":"Order","namespace":"shop","fields":[
 {"name":"id","type":"long"},
 {"name":"customer","type":{"type":"record","name":"Customer","fields":[{"name":"name","type":"string"},{"name":"tier","type":{"type":"enum","name":"Tier","symbols":["GOLD","SILVER"],"default":"SILVER"}}]}},
 {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":12,"scale":2}},
 {"name":"placed","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"placed_us","type":{"type":"long","logicalType":"timestamp-micros"}},
 {"name":"day","type":{"type":"int","logicalType":"date"}},
 {"name":"ref","type":{"type":"string","logicalType":"uuid"}},
 {"name":"note","type":["null","string"],"default":null},
 {"name":"tags","type":{"type":"array","items":"string"}},
 {"name":"attrs","type":{"type":"map","values":"int"}},
 {"name":"blob","type":"bytes"},
 {"name":"ratio","type":"double"},
 {"name":"channel","type":"string","default":"web"}
]}`

type customer struct {
	Name string `avro:"name"`
	Tier string `avro:"tier"`
}

type orderRec struct {
	ID       int64          `avro:"id"`
	Customer customer       `avro:"customer"`
	Amount   *big.Rat       `avro:"amount"`
	Placed   time.Time      `avro:"placed"`
	PlacedUS time.Time      `avro:"placed_us"`
	Day      time.Time      `avro:"day"`
	Ref      string         `avro:"ref"`
	Note     *string        `avro:"note"`
	Tags     []string       `avro:"tags"`
	Attrs    map[string]int `avro:"attrs"`
	Blob     []byte         `avro:"blob"`
	Ratio    float64        `avro:"ratio"`
	Legacy   string         `avro:"legacy"`
}

func mustParse(t testing.TB, s string) avro.Schema {
	t.Helper()
	sc, err := ParseSchema(s)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// sample is marshaled by hamba's own encoder, independent of Encode.
func sample(t testing.TB) []byte {
	t.Helper()
	note := `say "hi"` + "\n"
	rec := orderRec{
		ID: 42, Customer: customer{Name: "Zoë", Tier: "GOLD"},
		Amount:   big.NewRat(-1205, 100),
		Placed:   time.Date(2024, 5, 1, 12, 0, 0, 123e6, time.UTC),
		PlacedUS: time.Date(2024, 5, 1, 12, 0, 0, 123456e3, time.UTC),
		Day:      time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC),
		Ref:      "7d444840-9dc0-11d1-b245-5ffdce74fad2", Note: &note,
		Tags: []string{"a", "b"}, Attrs: map[string]int{"x": 1},
		Blob: []byte{0, 1, 2, 255}, Ratio: 0.25, Legacy: "old",
	}
	b, err := avro.Marshal(mustParse(t, orderV1), rec)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func decodeJSON(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("not JSON: %v: %s", err, b)
	}
	return m
}

func TestAppendJSONLogicalTypes(t *testing.T) {
	p, err := Compile(mustParse(t, orderV1), nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := p.AppendJSON([]byte("prefix"), sample(t))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(out), "prefix{") {
		t.Fatalf("dst not appended to: %s", out)
	}
	got := string(out[len("prefix"):])
	want := `{"id":42,"customer":{"name":"Zoë","tier":"GOLD"},"amount":-12.05,"placed":"2024-05-01T12:00:00.123Z",` +
		`"placed_us":"2024-05-01T12:00:00.123456Z","day":"2024-05-01T00:00:00Z","ref":"7d444840-9dc0-11d1-b245-5ffdce74fad2",` +
		`"note":"say \"hi\"\n","tags":["a","b"],"attrs":{"x":1},"blob":"AAEC/w==","ratio":0.25,"legacy":"old"}`
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

func TestEvolution(t *testing.T) {
	v1, v2 := mustParse(t, orderV1), mustParse(t, orderV2)
	t.Run("old writer, new reader", func(t *testing.T) {
		p, err := Compile(v1, v2)
		if err != nil {
			t.Fatal(err)
		}
		out, err := p.AppendJSON(nil, sample(t))
		if err != nil {
			t.Fatal(err)
		}
		m := decodeJSON(t, out)
		if m["channel"] != "web" {
			t.Errorf("channel = %v, want the reader's default web", m["channel"])
		}
		if _, ok := m["legacy"]; ok {
			t.Errorf("legacy, which the reader lacks, is in %s", out)
		}
		if m["id"] != 42.0 || m["amount"] != -12.05 {
			t.Errorf("fields read wrong: %s", out)
		}
	})
	t.Run("new writer, old reader", func(t *testing.T) {
		// v1 reads v2 only if legacy had a default: the resolution says so.
		if _, err := Compile(v2, v1); err == nil || !strings.Contains(err.Error(), "legacy") {
			t.Fatalf("Compile(v2 as v1) = %v, want an error naming legacy", err)
		}
		old := strings.Replace(orderV1, `{"name":"legacy","type":"string"}`, `{"name":"legacy","type":"string","default":"none"}`, 1)
		p, err := Compile(v2, mustParse(t, old))
		if err != nil {
			t.Fatal(err)
		}
		body, err := Encode(v2, []byte(`{"id":7,"customer":{"name":"a","tier":"SILVER"},"amount":"1.5","placed":"2024-01-02T03:04:05.006Z",
			"placed_us":1700000000000000,"day":"2024-01-02","ref":"7d444840-9dc0-11d1-b245-5ffdce74fad2","tags":[],"attrs":{},"blob":"","ratio":1,"channel":"app"}`))
		if err != nil {
			t.Fatal(err)
		}
		out, err := p.AppendJSON(nil, body)
		if err != nil {
			t.Fatal(err)
		}
		m := decodeJSON(t, out)
		if m["legacy"] != "none" || m["channel"] != nil || m["amount"] != 1.5 || m["note"] != nil || m["placed"] != "2024-01-02T03:04:05.006Z" || m["day"] != "2024-01-02T00:00:00Z" {
			t.Errorf("got %s", out)
		}
	})
	t.Run("alias", func(t *testing.T) {
		w := mustParse(t, `{"type":"record","name":"R","fields":[{"name":"quantity","type":"int"}]}`)
		r := mustParse(t, `{"type":"record","name":"R","fields":[{"name":"qty","type":"long","aliases":["quantity"]}]}`)
		p, err := Compile(w, r)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := avro.Marshal(w, map[string]any{"quantity": 4})
		if out, err := p.AppendJSON(nil, body); err != nil || string(out) != `{"qty":4}` {
			t.Errorf("got %s, %v; want the reader's name", out, err)
		}
	})
	t.Run("promotion", func(t *testing.T) {
		w := mustParse(t, `{"type":"record","name":"R","fields":[{"name":"n","type":"int"},{"name":"s","type":"string"},{"name":"e","type":{"type":"enum","name":"E","symbols":["A","B","C"]}}]}`)
		r := mustParse(t, `{"type":"record","name":"R","fields":[{"name":"n","type":["null","double"]},{"name":"s","type":"bytes"},{"name":"e","type":{"type":"enum","name":"E","symbols":["A","B"],"default":"A"}}]}`)
		p, err := Compile(w, r)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := avro.Marshal(w, map[string]any{"n": 3, "s": "hi", "e": "C"})
		out, err := p.AppendJSON(nil, body)
		if err != nil {
			t.Fatal(err)
		}
		if string(out) != `{"n":3,"s":"aGk=","e":"A"}` {
			t.Errorf("got %s", out)
		}
	})
}

func TestPoisonBodies(t *testing.T) {
	p, err := Compile(mustParse(t, orderV1), nil)
	if err != nil {
		t.Fatal(err)
	}
	good := sample(t)
	cases := map[string][]byte{
		"empty":         {},
		"truncated":     good[:len(good)/2],
		"trailing":      append(append([]byte{}, good...), 0),
		"json":          []byte(`{"id":1}`),
		"huge array":    append(append([]byte{}, good[:10]...), 0xfe, 0xff, 0xff, 0xff, 0x0f),
		"bad union":     unionBody(t, 9),
		"invalid utf-8": stringBody(t, []byte{0xff, 0xfe}),
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := p.AppendJSON([]byte("x"), body)
			if name == "bad union" || name == "invalid utf-8" {
				out, err = unionProgram(t).AppendJSON([]byte("x"), body)
			}
			if !errors.Is(err, ErrBody) {
				t.Fatalf("err = %v, want ErrBody", err)
			}
			if string(out) != "x" {
				t.Errorf("dst = %q after a failure, want it as it was", out)
			}
		})
	}
}

func unionProgram(t *testing.T) *Program {
	p, err := Compile(mustParse(t, `{"type":"record","name":"U","fields":[{"name":"v","type":["null","string"]}]}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func unionBody(t *testing.T, branch int64) []byte {
	w := avro.NewWriter(nil, 16)
	w.WriteLong(branch)
	return w.Buffer()
}

func stringBody(t *testing.T, s []byte) []byte {
	w := avro.NewWriter(nil, 16)
	w.WriteLong(1)
	w.WriteBytes(s)
	return w.Buffer()
}

func TestEncodeRoundTrip(t *testing.T) {
	s := mustParse(t, orderV1)
	p, err := Compile(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	first, err := p.AppendJSON(nil, sample(t))
	if err != nil {
		t.Fatal(err)
	}
	body, err := Encode(s, first)
	if err != nil {
		t.Fatal(err)
	}
	again, err := p.AppendJSON(nil, body)
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != string(first) {
		t.Errorf("AppendJSON(Encode(j)) = %s, want j = %s", again, first)
	}
	if _, err := Encode(s, []byte(`{"id":"x"}`)); err == nil || !strings.Contains(err.Error(), "$.id") {
		t.Errorf("Encode of a bad id: %v, want an error at $.id", err)
	}
}

func TestDecimalsAndUUIDFixed(t *testing.T) {
	s := mustParse(t, `{"type":"record","name":"D","fields":[
		{"name":"f","type":{"type":"fixed","name":"F","size":8,"logicalType":"decimal","precision":18,"scale":3}},
		{"name":"big","type":{"type":"bytes","logicalType":"decimal","precision":40,"scale":4}},
		{"name":"u","type":{"type":"fixed","name":"U","size":16,"logicalType":"uuid"}},
		{"name":"tm","type":{"type":"int","logicalType":"time-millis"}}]}`)
	p, err := Compile(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{
		`{"f":-0.005,"big":-123456789012345678901234.5678,"u":"7d444840-9dc0-11d1-b245-5ffdce74fad2","tm":"13:14:15.016"}`,
		`{"f":12.000,"big":0.0001,"u":"00000000-0000-0000-0000-000000000000","tm":"00:00:00.000"}`,
		`{"f":-0.123,"big":0.1234,"u":"00000000-0000-0000-0000-000000000000","tm":"23:59:59.999"}`,
	} {
		body, err := Encode(s, []byte(in))
		if err != nil {
			t.Fatal(err)
		}
		out, err := p.AppendJSON(nil, body)
		if err != nil {
			t.Fatal(err)
		}
		want := strings.ReplaceAll(strings.ReplaceAll(in, "12.000", "12.000"), " ", "")
		if string(out) != want {
			t.Errorf("got  %s\nwant %s", out, want)
		}
	}
}

func TestHugeBlocks(t *testing.T) {
	for _, schema := range []string{`{"type":"array","items":"null"}`, `{"type":"array","items":"long"}`, `{"type":"map","values":"null"}`} {
		p, err := Compile(mustParse(t, schema), nil)
		if err != nil {
			t.Fatal(err)
		}
		w := avro.NewWriter(nil, 16)
		w.WriteLong(1 << 40) // a trillion items
		w.WriteLong(0)
		if _, err := p.AppendJSON(nil, w.Buffer()); !errors.Is(err, ErrBody) || !strings.Contains(err.Error(), "block of") {
			t.Errorf("%s: %v, want the block refused", schema, err)
		}
	}
}
