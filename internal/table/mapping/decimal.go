package mapping

import (
	"errors"
	"math/big"
	"strconv"
)

// Decimal is an exact decimal value: Unscaled × 10^-Scale, where the
// unscaled value is Coef, or Big when it does not fit in an int64. The zero
// value is 0.
type Decimal struct {
	// Coef is the unscaled value when Big is nil.
	Coef int64
	// Big is the unscaled value when it does not fit in an int64, else nil.
	Big *big.Int
	// Scale is the number of digits after the decimal point. Values of a
	// decimal(p,s) column always have Scale s.
	Scale int32
}

// BigInt returns the unscaled value as a new big.Int.
func (d Decimal) BigInt() *big.Int {
	if d.Big != nil {
		return new(big.Int).Set(d.Big)
	}
	return big.NewInt(d.Coef)
}

// String formats d in plain decimal notation ("-12.30").
func (d Decimal) String() string {
	var digits string
	if d.Big != nil {
		digits = d.Big.String()
	} else {
		digits = strconv.FormatInt(d.Coef, 10)
	}
	neg := digits[0] == '-'
	if neg {
		digits = digits[1:]
	}
	if d.Scale > 0 {
		for len(digits) <= int(d.Scale) {
			digits = "0" + digits
		}
		digits = digits[:len(digits)-int(d.Scale)] + "." + digits[len(digits)-int(d.Scale):]
	}
	if neg {
		return "-" + digits
	}
	return digits
}

var (
	errNotNumber = errors.New("is not a number")
	errPrecision = errors.New("does not fit the precision")
)

// maxExponent bounds the exponent of a decimal literal, so that "1e999999"
// cannot make the parser build a huge number.
const maxExponent = 2 * MaxDecimalPrecision

// parseDecimal parses a JSON number literal (or the same text in a string)
// into a Decimal of type t, rounding half away from zero to t.Scale.
// scratch is reused for the digits.
func parseDecimal(text []byte, t Type, scratch []byte) (Decimal, []byte, error) {
	i, neg := 0, false
	if i < len(text) && (text[i] == '-' || text[i] == '+') {
		neg = text[i] == '-'
		i++
	}
	digits := scratch[:0]
	nInt, nFrac := 0, 0
	for ; i < len(text) && text[i] >= '0' && text[i] <= '9'; i++ {
		digits = append(digits, text[i])
		nInt++
	}
	if i < len(text) && text[i] == '.' {
		i++
		for ; i < len(text) && text[i] >= '0' && text[i] <= '9'; i++ {
			digits = append(digits, text[i])
			nFrac++
		}
	}
	if nInt+nFrac == 0 {
		return Decimal{}, digits, errNotNumber
	}
	exp := 0
	if i < len(text) && (text[i] == 'e' || text[i] == 'E') {
		i++
		eneg := false
		if i < len(text) && (text[i] == '-' || text[i] == '+') {
			eneg = text[i] == '-'
			i++
		}
		if i == len(text) {
			return Decimal{}, digits, errNotNumber
		}
		for ; i < len(text) && text[i] >= '0' && text[i] <= '9'; i++ {
			if exp = exp*10 + int(text[i]-'0'); exp > maxExponent {
				return Decimal{}, digits, errPrecision
			}
		}
		if eneg {
			exp = -exp
		}
	}
	if i != len(text) {
		return Decimal{}, digits, errNotNumber
	}
	// value = digits × 10^(exp-nFrac)
	exp10 := exp - nFrac
	scale := t.Scale
	if t.Precision == 0 {
		scale = max(0, -exp10)
	}
	if shift := exp10 + scale; shift >= 0 {
		for range shift {
			digits = append(digits, '0')
		}
	} else {
		drop := -shift
		if drop > len(digits) {
			digits = digits[:0]
		} else {
			roundUp := digits[len(digits)-drop] >= '5'
			digits = digits[:len(digits)-drop]
			if roundUp {
				j := len(digits) - 1
				for ; j >= 0 && digits[j] == '9'; j-- {
					digits[j] = '0'
				}
				if j >= 0 {
					digits[j]++
				} else {
					digits = append(digits, 0)
					copy(digits[1:], digits)
					digits[0] = '1'
				}
			}
		}
	}
	lead := 0
	for lead < len(digits) && digits[lead] == '0' {
		lead++
	}
	sig := digits[lead:]
	if t.Precision > 0 && len(sig) > t.Precision {
		return Decimal{}, digits, errPrecision
	}
	d := Decimal{Scale: int32(scale)}
	if len(sig) <= 18 {
		for _, c := range sig {
			d.Coef = d.Coef*10 + int64(c-'0')
		}
		if neg {
			d.Coef = -d.Coef
		}
		return d, digits, nil
	}
	d.Big, _ = new(big.Int).SetString(string(sig), 10)
	if neg {
		d.Big.Neg(d.Big)
	}
	return d, digits, nil
}
