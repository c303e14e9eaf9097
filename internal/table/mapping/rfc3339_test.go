package mapping

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// checkRFC3339 fails when parseRFC3339 accepts s and time.Parse does not,
// or when they differ on the instant. What parseRFC3339 declines goes to
// time.Parse, so it cannot differ.
func checkRFC3339(t *testing.T, s string) (fast bool) {
	t.Helper()
	want, err := time.Parse(time.RFC3339Nano, s)
	for _, unit := range []TimeUnit{Micros, Millis} {
		got, ok := parseRFC3339([]byte(s), unit)
		if !ok {
			continue
		}
		fast = true
		if err != nil {
			t.Fatalf("parseRFC3339 accepts %q, time.Parse: %v", s, err)
		}
		if w := want.UTC().Truncate(unit.duration()); got != w {
			t.Fatalf("parseRFC3339(%q, %v) = %v, time.Parse then Truncate: %v", s, unit, got, w)
		}
	}
	return fast
}

func TestParseRFC3339(t *testing.T) {
	// The common forms take the fast path.
	for _, s := range []string{"2026-11-30T00:00:00Z", "2026-11-30T00:00:00.123Z", "2024-05-06T07:08:09.123456789Z",
		"2024-05-06T07:08:09.1234567891234Z", "2024-02-29T23:59:59.999999999+01:00", "0000-01-01T00:00:00.000001-23:59",
		"9999-12-31T23:59:59.9999999+00:00", "1969-12-31T23:59:59.5Z", "2000-02-29T12:00:00-00:00", "1900-03-01T00:00:00Z"} {
		if !checkRFC3339(t, s) {
			t.Errorf("%q does not take the fast path", s)
		}
	}
	// Pieces put together at random, each valid (the first valid[i]
	// of pieces[i]) nine times in ten: every mix agrees with time.Parse.
	pieces := [][]string{
		{"2026", "2024", "2000", "1900", "2100", "2200", "1600", "0000", "9999", "1970", "1969", "0001", "202", "20261", "２026", "-026", "+026", "abcd", "20;6", "202?"},
		{"-", "/", " ", ""},
		{"01", "02", "03", "12", "00", "13", "1", "9", "x1", "0:"},
		{"-", "/", ""},
		{"01", "28", "29", "30", "31", "00", "32", "1", "3 ", "2;"},
		{"T", "t", " ", "_", ""},
		{"00", "23", "07", "24", "9", "-1", "1<"},
		{":", ""},
		{"00", "59", "60", "5", "3="},
		{":", ""},
		{"00", "59", "60", "61", "5", "5.", "4>"},
		{"", ".1", ".12", ".123", ".123456", ".1234567", ".123456789", ".1234567891", ".99999999999", ".", ",123", ".1a", "..1", ".-1"},
		{"Z", "+00:00", "-00:00", "+01:00", "-23:59", "z", "", "+24:00", "+05:60", "+0530", "+05:30:00", "+5:30", "Z ", " Z", "ZZ", "+05:3x", "+1;:00", "-00:0?", "UTC"},
	}
	valid := []int{13, 1, 4, 1, 5, 1, 3, 1, 2, 1, 2, 9, 5}
	rnd := rand.New(rand.NewPCG(3, 3339))
	fast := 0
	const n = 50000
	for range n {
		var b strings.Builder
		for i, p := range pieces {
			if rnd.IntN(10) > 0 {
				p = p[:valid[i]]
			}
			b.WriteString(p[rnd.IntN(len(p))])
		}
		if checkRFC3339(t, b.String()) {
			fast++
		}
	}
	if fast < n/10 || fast == n {
		t.Fatalf("%d of %d mixes take the fast path: the mixes test too little", fast, n)
	}
	// Instants over the whole range, in zones up to a day off.
	for range 20000 {
		tm := time.Unix(rnd.Int64N(253402300800+62167219200)-62167219200, rnd.Int64N(1e9))
		tm = tm.In(time.FixedZone("", (rnd.IntN(48*60-1)-(24*60-1))*60))
		if s := tm.Format(time.RFC3339Nano); !checkRFC3339(t, s) && tm.Year() >= 0 && tm.Year() <= 9999 {
			t.Fatalf("%q does not take the fast path", s)
		}
	}
	// Each day around leap days and the turns of centuries.
	for _, y := range []int{1899, 1999, 2099} {
		for d := time.Date(y, 12, 1, 0, 0, 0, 0, time.UTC); d.Year() < y+2 || d.Month() < 4; d = d.AddDate(0, 0, 1) {
			for _, z := range []string{"Z", "+23:59", "-23:59"} {
				for _, clock := range []string{"00:00:00", "23:59:59.999999"} {
					if s := d.Format("2006-01-02") + "T" + clock + z; !checkRFC3339(t, s) {
						t.Fatalf("%q does not take the fast path", s)
					}
				}
			}
		}
	}
}

func FuzzParseRFC3339(f *testing.F) {
	for _, s := range []string{"2026-11-30T00:00:00.123Z", "2024-02-29T23:59:59.999999999+01:00", "0000-01-01T00:00:00-23:59", "2023-02-29T00:00:00Z", "2026-11-30T24:00:00Z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkRFC3339(t, s) })
}

// BenchmarkParseRFC3339 compares the fast path with time.Parse then
// Truncate, what a timestamp column did before.
func BenchmarkParseRFC3339(b *testing.B) {
	s := []byte("2026-11-30T00:20:34.567Z")
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			if _, ok := parseRFC3339(s, Micros); !ok {
				b.Fatal("slow path")
			}
		}
	})
	b.Run("time.Parse", func(b *testing.B) {
		for b.Loop() {
			t, err := time.Parse(time.RFC3339Nano, string(s))
			if err != nil {
				b.Fatal(err)
			}
			_ = t.UTC().Truncate(time.Microsecond)
		}
	})
}
