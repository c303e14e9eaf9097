package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ByteSize is a size in bytes, written in configs as a plain number of bytes
// (1024) or a number with a unit (64MiB, 10MB, 1.5GiB, "512 KiB").
//
// Units, case-insensitive: B; decimal KB, MB, GB, TB (powers of 1000); binary
// KiB, MiB, GiB, TiB (powers of 1024). A single-letter unit such as "M" is
// rejected because it is ambiguous between the two.
type ByteSize int64

// Common sizes.
const (
	KiB ByteSize = 1 << 10
	MiB ByteSize = 1 << 20
	GiB ByteSize = 1 << 30
	TiB ByteSize = 1 << 40
)

var byteUnits = map[string]float64{
	"b":   1,
	"kb":  1e3,
	"mb":  1e6,
	"gb":  1e9,
	"tb":  1e12,
	"kib": 1 << 10,
	"mib": 1 << 20,
	"gib": 1 << 30,
	"tib": 1 << 40,
}

// ParseByteSize parses a size such as "64MiB", "10MB" or "1024" (see
// [ByteSize] for the units). Negative sizes are rejected.
func ParseByteSize(s string) (ByteSize, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	if num == "" {
		return 0, fmt.Errorf("%s is not a size: write a number of bytes with an optional unit, e.g. 64MiB or 10MB", Quote(s))
	}
	mult := 1.0
	if unit != "" {
		m, ok := byteUnits[unit]
		if !ok {
			return 0, fmt.Errorf("%s: unknown size unit %s (use B, KB, MB, GB, TB, KiB, MiB, GiB or TiB)", Quote(s), Quote(t[i:]))
		}
		mult = m
	}
	if !strings.Contains(num, ".") {
		n, err := strconv.ParseInt(num, 10, 64)
		if err == nil && (mult == 1 || n <= math.MaxInt64/int64(mult)) {
			return ByteSize(n * int64(mult)), nil
		}
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("%s is not a size: write a number of bytes with an optional unit, e.g. 64MiB", Quote(s))
	}
	v := math.Round(f * mult)
	if v >= math.MaxInt64 {
		return 0, fmt.Errorf("%s is too large", Quote(s))
	}
	return ByteSize(v), nil
}

// String writes the size with the largest binary unit that divides it
// exactly, or in bytes: 64MiB, 1536KiB, 1000.
func (b ByteSize) String() string {
	for _, u := range []struct {
		size ByteSize
		name string
	}{{TiB, "TiB"}, {GiB, "GiB"}, {MiB, "MiB"}, {KiB, "KiB"}} {
		if b != 0 && b%u.size == 0 {
			return strconv.FormatInt(int64(b/u.size), 10) + u.name
		}
	}
	return strconv.FormatInt(int64(b), 10)
}

// MarshalText writes the size as [ByteSize.String] does.
func (b ByteSize) MarshalText() ([]byte, error) { return []byte(b.String()), nil }

// UnmarshalConfig decodes a size from a YAML integer or a string.
func (b *ByteSize) UnmarshalConfig(raw any) error {
	switch v := raw.(type) {
	case string:
		n, err := ParseByteSize(v)
		if err != nil {
			return err
		}
		*b = n
		return nil
	case nil:
		return nil
	}
	n, ok := toInt64(raw)
	if !ok {
		return fmt.Errorf("expected a size such as 64MiB, got %s", describe(raw))
	}
	if n < 0 {
		return fmt.Errorf("size %d is negative", n)
	}
	*b = ByteSize(n)
	return nil
}
