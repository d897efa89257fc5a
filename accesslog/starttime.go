package accesslog

import (
	"strconv"
	"time"
)

// timeFormat is a compiled %START_TIME(...)% format: absl::FormatTime's strftime-like
// directives plus Envoy's %s (epoch seconds) and %f/%Nf (fractional seconds, N digits,
// 9 without N). Times are printed in UTC, as Envoy prints them.
type timeFormat struct {
	pieces []timePiece
}

type timePiece struct {
	lit  string
	verb byte // 0 for a literal
	n    int  // digits for 'f' and 'E' (fractional seconds), -1 for %E*S
}

// defaultTimeFormat is Envoy's default START_TIME format: 2016-04-15T20:17:00.310Z.
const defaultTimeFormat = "%Y-%m-%dT%H:%M:%E3SZ"

// timeVerbs are the single-letter directives understood after '%'.
const timeVerbs = "YmdHMSybBaAjezZTDFRpIklnts"

func compileTimeFormat(f string) *timeFormat {
	tf := &timeFormat{}
	lit := make([]byte, 0, len(f))
	flush := func() {
		if len(lit) > 0 {
			tf.pieces = append(tf.pieces, timePiece{lit: string(lit)})
			lit = lit[:0]
		}
	}
	for i := 0; i < len(f); i++ {
		c := f[i]
		if c != '%' || i+1 >= len(f) {
			lit = append(lit, c)
			continue
		}
		next := f[i+1]
		switch {
		case next == '%':
			lit = append(lit, '%')
			i++
		case next >= '1' && next <= '9' && i+2 < len(f) && f[i+2] == 'f':
			flush()
			tf.pieces = append(tf.pieces, timePiece{verb: 'f', n: int(next - '0')})
			i += 2
		case next == 'f':
			flush()
			tf.pieces = append(tf.pieces, timePiece{verb: 'f', n: 9})
			i++
		case next == 'E' && i+3 < len(f) && f[i+3] == 'S' && (f[i+2] == '*' || f[i+2] >= '0' && f[i+2] <= '9'):
			flush()
			n := -1
			if f[i+2] != '*' {
				n = int(f[i+2] - '0')
			}
			tf.pieces = append(tf.pieces, timePiece{verb: 'E', n: n})
			i += 3
		case next == 'E' && i+2 < len(f) && f[i+2] == 'z':
			flush()
			tf.pieces = append(tf.pieces, timePiece{verb: 'P'}) // +00:00
			i += 2
		case indexByte(timeVerbs, next) >= 0:
			flush()
			tf.pieces = append(tf.pieces, timePiece{verb: next})
			i++
		default:
			lit = append(lit, c)
		}
	}
	flush()
	return tf
}

func indexByte(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}

var (
	shortDays   = [7]string{"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"}
	shortMonths = [12]string{"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"}
)

// appendPadded appends v in decimal, left-padded with pad to width.
func appendPadded(dst []byte, v, width int, pad byte) []byte {
	var buf [20]byte
	s := strconv.AppendInt(buf[:0], int64(v), 10)
	for i := len(s); i < width; i++ {
		dst = append(dst, pad)
	}
	return append(dst, s...)
}

// appendFraction appends the first n digits of the nanoseconds (truncated).
func appendFraction(dst []byte, nanos, n int) []byte {
	var buf [9]byte
	for i := 8; i >= 0; i-- {
		buf[i] = byte('0' + nanos%10)
		nanos /= 10
	}
	return append(dst, buf[:n]...)
}

func (tf *timeFormat) append(dst []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	hour, minute, sec := t.Clock()
	for _, p := range tf.pieces {
		switch p.verb {
		case 0:
			dst = append(dst, p.lit...)
		case 'Y':
			dst = strconv.AppendInt(dst, int64(year), 10)
		case 'y':
			dst = appendPadded(dst, year%100, 2, '0')
		case 'm':
			dst = appendPadded(dst, int(month), 2, '0')
		case 'd':
			dst = appendPadded(dst, day, 2, '0')
		case 'e':
			dst = appendPadded(dst, day, 2, ' ')
		case 'H':
			dst = appendPadded(dst, hour, 2, '0')
		case 'k':
			dst = appendPadded(dst, hour, 2, ' ')
		case 'I', 'l':
			h := hour % 12
			if h == 0 {
				h = 12
			}
			pad := byte('0')
			if p.verb == 'l' {
				pad = ' '
			}
			dst = appendPadded(dst, h, 2, pad)
		case 'p':
			if hour < 12 {
				dst = append(dst, "AM"...)
			} else {
				dst = append(dst, "PM"...)
			}
		case 'M':
			dst = appendPadded(dst, minute, 2, '0')
		case 'S':
			dst = appendPadded(dst, sec, 2, '0')
		case 'E':
			dst = appendPadded(dst, sec, 2, '0')
			ns := t.Nanosecond()
			switch {
			case p.n > 0:
				dst = append(dst, '.')
				dst = appendFraction(dst, ns, p.n)
			case p.n < 0 && ns != 0:
				n := 9
				for v := ns; v%10 == 0; v /= 10 {
					n--
				}
				dst = append(dst, '.')
				dst = appendFraction(dst, ns, n)
			}
		case 'f':
			dst = appendFraction(dst, t.Nanosecond(), p.n)
		case 's':
			dst = strconv.AppendInt(dst, t.Unix(), 10)
		case 'b':
			dst = append(dst, shortMonths[month-1]...)
		case 'B':
			dst = append(dst, month.String()...)
		case 'a':
			dst = append(dst, shortDays[t.Weekday()]...)
		case 'A':
			dst = append(dst, t.Weekday().String()...)
		case 'j':
			dst = appendPadded(dst, t.YearDay(), 3, '0')
		case 'z':
			dst = append(dst, "+0000"...)
		case 'P':
			dst = append(dst, "+00:00"...)
		case 'Z':
			dst = append(dst, "UTC"...)
		case 'T':
			dst = appendTriple(dst, hour, minute, sec, ':')
		case 'R':
			dst = appendTriple(dst, hour, minute, -1, ':')
		case 'D':
			dst = appendTriple(dst, int(month), day, year%100, '/')
		case 'F':
			dst = strconv.AppendInt(dst, int64(year), 10)
			dst = append(dst, '-')
			dst = appendPadded(dst, int(month), 2, '0')
			dst = append(dst, '-')
			dst = appendPadded(dst, day, 2, '0')
		case 'n':
			dst = append(dst, '\n')
		case 't':
			dst = append(dst, '\t')
		}
	}
	return dst
}

// appendTriple appends "aa<sep>bb<sep>cc" with two-digit fields; c < 0 leaves it out.
func appendTriple(dst []byte, a, b, c int, sep byte) []byte {
	dst = appendPadded(dst, a, 2, '0')
	dst = append(dst, sep)
	dst = appendPadded(dst, b, 2, '0')
	if c >= 0 {
		dst = append(dst, sep)
		dst = appendPadded(dst, c, 2, '0')
	}
	return dst
}
