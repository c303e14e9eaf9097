package mapping

import "time"

// parseRFC3339 parses the forms of RFC 3339 that time.Parse(RFC3339Nano)
// reads on its own fast path (2006-01-02T15:04:05[.fraction](Z|±07:00),
// with the same range checks) and returns the instant in UTC truncated to
// unit. It reports false for everything else, which the caller hands to
// time.Parse: whatever it accepts, it agrees with time.Parse, without
// time.Date's normalization or a zone made for the offset.
func parseRFC3339(b []byte, unit TimeUnit) (time.Time, bool) {
	if len(b) < len("2006-01-02T15:04:05") ||
		b[4] != '-' || b[7] != '-' || b[10] != 'T' || b[13] != ':' || b[16] != ':' {
		return time.Time{}, false
	}
	century, ok1 := two(b, 0)
	yy, ok2 := two(b, 2)
	month, ok3 := two(b, 5)
	day, ok4 := two(b, 8)
	hour, ok5 := two(b, 11)
	minute, ok6 := two(b, 14)
	sec, ok7 := two(b, 17)
	year := century*100 + yy
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6 && ok7) ||
		month < 1 || month > 12 || hour > 23 || minute > 59 || sec > 59 || day < 1 || day > daysIn(month, year) {
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
		hh, ok1 := two(b, 1)
		mm, ok2 := two(b, 4)
		if !ok1 || !ok2 || hh > 23 || mm > 59 {
			return time.Time{}, false
		}
		offset = (hh*60 + mm) * 60
		if b[0] == '-' {
			offset = -offset
		}
	}
	unix := daysSinceEpoch(year, month, day)*86400 + int64(hour*3600+minute*60+sec-offset)
	// Flooring the nanoseconds is Truncate: the zero time is a whole second.
	if unit == Millis {
		nsec -= nsec % 1e6
	} else {
		nsec -= nsec % 1e3
	}
	return time.Unix(unix, int64(nsec)).UTC(), true
}

// two parses the two decimal digits at b[i:i+2].
func two(b []byte, i int) (int, bool) {
	hi, lo := b[i]-'0', b[i+1]-'0'
	return int(hi)*10 + int(lo), hi <= 9 && lo <= 9
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
