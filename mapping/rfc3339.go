package mapping

import "time"

// parseRFC3339 parses the forms of RFC 3339 that time.Parse(RFC3339Nano)
// reads on its own fast path (2006-01-02T15:04:05[.fraction](Z|±07:00),
// with the same range checks) and returns the instant in UTC truncated to
// unit. It reports false for everything else, which the caller hands to
// time.Parse: whatever it accepts, it agrees with time.Parse, without
// time.Date's normalization or a zone made for the offset.
func parseRFC3339(b []byte, unit time.Duration) (time.Time, bool) {
	if len(b) < len("2006-01-02T15:04:05") ||
		b[4] != '-' || b[7] != '-' || b[10] != 'T' || b[13] != ':' || b[16] != ':' {
		return time.Time{}, false
	}
	year, ok1 := num(b[0:4], 0, 9999)
	month, ok2 := num(b[5:7], 1, 12)
	hour, ok3 := num(b[11:13], 0, 23)
	minute, ok4 := num(b[14:16], 0, 59)
	sec, ok5 := num(b[17:19], 0, 59)
	if !(ok1 && ok2 && ok3 && ok4 && ok5) {
		return time.Time{}, false
	}
	day, ok := num(b[8:10], 1, daysIn(month, year))
	if !ok {
		return time.Time{}, false
	}
	b = b[19:]
	nsec := 0
	if len(b) >= 2 && b[0] == '.' && b[1]-'0' <= 9 {
		n := 1
		for ; n < len(b) && b[n]-'0' <= 9; n++ {
			if n <= 9 { // digits past the nanosecond are ignored, as time.Parse does
				nsec = nsec*10 + int(b[n]-'0')
			}
		}
		for k := n; k <= 9; k++ {
			nsec *= 10
		}
		b = b[n:]
	}
	offset := 0
	if len(b) != 1 || b[0] != 'Z' {
		if len(b) != len("-07:00") || (b[0] != '+' && b[0] != '-') || b[3] != ':' {
			return time.Time{}, false
		}
		hh, ok1 := num(b[1:3], 0, 23)
		mm, ok2 := num(b[4:6], 0, 59)
		if !ok1 || !ok2 {
			return time.Time{}, false
		}
		offset = (hh*60 + mm) * 60
		if b[0] == '-' {
			offset = -offset
		}
	}
	unix := daysSinceEpoch(year, month, day)*86400 + int64(hour*3600+minute*60+sec-offset)
	// Flooring the nanoseconds is Truncate: the zero time is a whole second.
	return time.Unix(unix, int64(nsec-nsec%int(unit))).UTC(), true
}

// num parses b, all decimal digits, and checks lo <= value <= hi.
func num(b []byte, lo, hi int) (int, bool) {
	n := 0
	for _, c := range b {
		if c-'0' > 9 {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, lo <= n && n <= hi
}

// daysIn returns the number of days of month in year (proleptic Gregorian).
func daysIn(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// daysSinceEpoch returns the days from 1970-01-01 to the date
// (proleptic Gregorian, year >= 0), by counting in 400-year eras that
// start on March 1st so that the leap day ends a year.
func daysSinceEpoch(year, month, day int) int64 {
	if month <= 2 {
		year--
	}
	era := (year+400)/400 - 1                      // floor(year/400) for year >= -1
	yoe := year - era*400                          // [0, 399]
	doy := (153*((month+9)%12)+2)/5 + day - 1      // [0, 365], from March 1st
	doe := yoe*365 + yoe/4 - yoe/100 + doy         // [0, 146096]
	return int64(era)*146097 + int64(doe) - 719468 // 719468: days from 0000-03-01 to 1970-01-01
}
