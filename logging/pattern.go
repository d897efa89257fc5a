package logging

import (
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// record is one log message with everything a pattern flag can print.
type record struct {
	time  time.Time // already in the registry's location
	level Level
	name  string // logger name: component, or file key with fine-grain logging
	msg   string
	file  string // source file, module-relative when inside the module
	line  int
	fn    string // function name at the call site
	tid   int
	pid   int
}

// padSide is where spdlog puts the padding spaces.
type padSide uint8

const (
	padLeft   padSide = iota // "%8l": right-aligned, spaces on the left
	padRight                 // "%-8l": left-aligned
	padCenter                // "%=8l"
)

// padding is spdlog's padding_info: [-|=]<width>[!].
type padding struct {
	width    int
	side     padSide
	truncate bool
	enabled  bool
}

// maxPadWidth is spdlog's cap on a padding width.
const maxPadWidth = 64

// item is one compiled element of a pattern: literal text (flag 0) or a flag.
type item struct {
	flag byte
	lit  string
	pad  padding
	last *atomic.Int64 // %o %i %u %O: time of the previous message, unix ns
}

// pattern is a compiled spdlog pattern. It is immutable apart from the
// elapsed-time flags' atomics, so one pattern serves all goroutines.
type pattern struct {
	items       []item
	needsTID    bool // %t is used: a thread id costs a system call
	needsSource bool // %@ %s %g %# or %! is used: the call site is resolved
}

// compilePattern compiles an spdlog pattern the way spdlog's
// pattern_formatter does, with Envoy's custom flags %_ %j %* %+ registered.
// It never fails: an unknown flag is printed as is ("%Q" stays "%Q") and a
// dangling '%' at the end is dropped, as in spdlog. now is the start time of
// the elapsed-time flags.
func compilePattern(p string, now time.Time) *pattern {
	pt := &pattern{}
	var lit strings.Builder
	flushLit := func() {
		if lit.Len() > 0 {
			pt.items = append(pt.items, item{lit: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(p); i++ {
		if p[i] != '%' {
			lit.WriteByte(p[i])
			continue
		}
		flushLit()
		i++
		pad, n := parsePadding(p[i:])
		i += n
		if i >= len(p) {
			break
		}
		flag := p[i]
		switch flag {
		case 'a', 'A', 'b', 'h', 'B', 'c', 'C', 'Y', 'D', 'x', 'm', 'd', 'H', 'I', 'M', 'S',
			'e', 'f', 'F', 'E', 'p', 'r', 'R', 'T', 'X', 'z', 't', 'P', 'n', 'l', 'L', 'v',
			'@', 's', 'g', '#', '!', '^', '$':
			pt.items = append(pt.items, item{flag: flag, pad: pad})
		case 'o', 'i', 'u', 'O':
			last := new(atomic.Int64)
			last.Store(now.UnixNano())
			pt.items = append(pt.items, item{flag: flag, pad: pad, last: last})
		case '%':
			pt.items = append(pt.items, item{lit: "%"})
		case '_', 'j', '*', '+':
			// Envoy's custom flags ignore padding.
			pt.items = append(pt.items, item{flag: flag})
		default:
			if pad.truncate {
				// spdlog issue #1617: "%10!]" is the function name padded to
				// 10, followed by the unknown character.
				pad.truncate = false
				pt.items = append(pt.items, item{flag: '!', pad: pad}, item{lit: string(flag)})
			} else {
				pt.items = append(pt.items, item{lit: "%" + string(flag)})
			}
		}
	}
	flushLit()
	for _, it := range pt.items {
		switch it.flag {
		case 't':
			pt.needsTID = true
		case '@', 's', 'g', '#', '!':
			pt.needsSource = true
		}
	}
	return pt
}

// parsePadding reads an optional padding spec at the start of s and returns
// it with the number of bytes consumed. Like spdlog, a '-' or '=' not followed
// by a digit is consumed and yields no padding.
func parsePadding(s string) (padding, int) {
	if s == "" {
		return padding{}, 0
	}
	i := 0
	side := padLeft
	switch s[0] {
	case '-':
		side = padRight
		i++
	case '=':
		side = padCenter
		i++
	}
	if i >= len(s) || s[i] < '0' || s[i] > '9' {
		return padding{}, i
	}
	width := 0
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		if width <= maxPadWidth {
			width = width*10 + int(s[i]-'0')
		}
	}
	pad := padding{width: min(width, maxPadWidth), side: side, enabled: true}
	if i < len(s) && s[i] == '!' {
		pad.truncate = true
		i++
	}
	return pad, i
}

var (
	shortDays   = [...]string{"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"}
	fullDays    = [...]string{"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"}
	shortMonths = [...]string{"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sept", "Oct", "Nov", "Dec"}
	fullMonths  = [...]string{"January", "February", "March", "April", "May", "June", "July", "August",
		"September", "October", "November", "December"}
)

// format appends the formatted record (without the end-of-line) to buf.
func (pt *pattern) format(buf []byte, r *record) []byte {
	for i := range pt.items {
		it := &pt.items[i]
		if it.flag == 0 {
			buf = append(buf, it.lit...)
			continue
		}
		start := len(buf)
		buf = it.appendFlag(buf, r)
		if it.pad.enabled {
			buf = applyPadding(buf, start, it.pad)
		}
	}
	return buf
}

// applyPadding pads or truncates buf[start:] as spdlog's scoped_padder does.
func applyPadding(buf []byte, start int, pad padding) []byte {
	n := len(buf) - start
	missing := pad.width - n
	if missing < 0 {
		if pad.truncate {
			return buf[:start+pad.width]
		}
		return buf
	}
	if missing == 0 {
		return buf
	}
	left := 0
	switch pad.side {
	case padLeft:
		left = missing
	case padCenter:
		left = missing / 2
	}
	right := missing - left
	buf = append(buf, make([]byte, missing)...)
	copy(buf[start+left:], buf[start:start+n])
	for i := start; i < start+left; i++ {
		buf[i] = ' '
	}
	for i := len(buf) - right; i < len(buf); i++ {
		buf[i] = ' '
	}
	return buf
}

func pad2(buf []byte, v int) []byte {
	if v >= 0 && v < 10 {
		buf = append(buf, '0')
	}
	return strconv.AppendInt(buf, int64(v), 10)
}

// padN appends v zero-padded to n digits.
func padN(buf []byte, v int64, n int) []byte {
	digits := 1
	for x := v; x >= 10; x /= 10 {
		digits++
	}
	for ; digits < n; digits++ {
		buf = append(buf, '0')
	}
	return strconv.AppendInt(buf, v, 10)
}

func to12h(hour int) int {
	if hour > 12 {
		return hour - 12
	}
	return hour
}

func ampm(hour int) string {
	if hour >= 12 {
		return "PM"
	}
	return "AM"
}

func appendClock(buf []byte, t time.Time) []byte {
	buf = pad2(buf, t.Hour())
	buf = append(buf, ':')
	buf = pad2(buf, t.Minute())
	buf = append(buf, ':')
	return pad2(buf, t.Second())
}

// appendFlag appends the text of one flag.
func (it *item) appendFlag(buf []byte, r *record) []byte {
	t := r.time
	switch it.flag {
	case 'a':
		return append(buf, shortDays[t.Weekday()]...)
	case 'A':
		return append(buf, fullDays[t.Weekday()]...)
	case 'b', 'h':
		return append(buf, shortMonths[t.Month()-1]...)
	case 'B':
		return append(buf, fullMonths[t.Month()-1]...)
	case 'c':
		buf = append(buf, shortDays[t.Weekday()]...)
		buf = append(buf, ' ')
		buf = append(buf, shortMonths[t.Month()-1]...)
		buf = append(buf, ' ')
		buf = strconv.AppendInt(buf, int64(t.Day()), 10)
		buf = append(buf, ' ')
		buf = appendClock(buf, t)
		buf = append(buf, ' ')
		return strconv.AppendInt(buf, int64(t.Year()), 10)
	case 'C':
		return pad2(buf, t.Year()%100)
	case 'Y':
		return strconv.AppendInt(buf, int64(t.Year()), 10)
	case 'D', 'x':
		buf = pad2(buf, int(t.Month()))
		buf = append(buf, '/')
		buf = pad2(buf, t.Day())
		buf = append(buf, '/')
		return pad2(buf, t.Year()%100)
	case 'm':
		return pad2(buf, int(t.Month()))
	case 'd':
		return pad2(buf, t.Day())
	case 'H':
		return pad2(buf, t.Hour())
	case 'I':
		return pad2(buf, to12h(t.Hour()))
	case 'M':
		return pad2(buf, t.Minute())
	case 'S':
		return pad2(buf, t.Second())
	case 'e':
		return padN(buf, int64(t.Nanosecond()/1e6), 3)
	case 'f':
		return padN(buf, int64(t.Nanosecond()/1e3), 6)
	case 'F':
		return padN(buf, int64(t.Nanosecond()), 9)
	case 'E':
		return strconv.AppendInt(buf, t.Unix(), 10)
	case 'p':
		return append(buf, ampm(t.Hour())...)
	case 'r':
		buf = pad2(buf, to12h(t.Hour()))
		buf = append(buf, ':')
		buf = pad2(buf, t.Minute())
		buf = append(buf, ':')
		buf = pad2(buf, t.Second())
		buf = append(buf, ' ')
		return append(buf, ampm(t.Hour())...)
	case 'R':
		buf = pad2(buf, t.Hour())
		buf = append(buf, ':')
		return pad2(buf, t.Minute())
	case 'T', 'X':
		return appendClock(buf, t)
	case 'z':
		_, offset := t.Zone()
		minutes := offset / 60
		if minutes < 0 {
			minutes = -minutes
			buf = append(buf, '-')
		} else {
			buf = append(buf, '+')
		}
		buf = pad2(buf, minutes/60)
		buf = append(buf, ':')
		return pad2(buf, minutes%60)
	case 't':
		return strconv.AppendInt(buf, int64(r.tid), 10)
	case 'P':
		return strconv.AppendInt(buf, int64(r.pid), 10)
	case 'n':
		return append(buf, r.name...)
	case 'l':
		return append(buf, r.level.String()...)
	case 'L':
		return append(buf, r.level.short()...)
	case 'v':
		return append(buf, r.msg...)
	case '@':
		if r.file == "" {
			return buf
		}
		buf = append(buf, r.file...)
		buf = append(buf, ':')
		return strconv.AppendInt(buf, int64(r.line), 10)
	case 's':
		if r.file == "" {
			return buf
		}
		return append(buf, r.file[strings.LastIndexByte(r.file, '/')+1:]...)
	case 'g':
		return append(buf, r.file...)
	case '#':
		if r.file == "" {
			return buf
		}
		return strconv.AppendInt(buf, int64(r.line), 10)
	case '!':
		return append(buf, r.fn...)
	case 'o', 'i', 'u', 'O':
		now := t.UnixNano()
		prev := it.last.Swap(now)
		delta := max(now-prev, 0)
		switch it.flag {
		case 'o':
			delta /= int64(time.Millisecond)
		case 'i':
			delta /= int64(time.Microsecond)
		case 'O':
			delta /= int64(time.Second)
		}
		return strconv.AppendInt(buf, delta, 10)
	case '_':
		return appendNewlineEscaped(buf, r.msg)
	case 'j', '+':
		return appendEscaped(buf, r.msg, jsonEscapes)
	}
	// '^', '$' (colour ranges) and '*' (log tags, which Legate never
	// attaches) print nothing.
	return buf
}

// appendNewlineEscaped is Envoy's %_: every "\n" becomes the two characters
// backslash and n.
func appendNewlineEscaped(buf []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			buf = append(buf, '\\', 'n')
		} else {
			buf = append(buf, s[i])
		}
	}
	return buf
}

// escapeTable maps a byte to its escape sequence; "" leaves the byte as is.
type escapeTable [256]string

// jsonEscapes is Envoy's JsonEscaper (%j, %+): quote, backslash and the
// control characters are escaped; all other bytes, including UTF-8
// sequences, pass through unchanged.
var jsonEscapes = func() *escapeTable {
	const hex = "0123456789abcdef"
	t := &escapeTable{'"': `\"`, '\\': `\\`, '\b': `\b`, '\f': `\f`, '\n': `\n`, '\r': `\r`, '\t': `\t`}
	for c := 0; c <= 0x1f; c++ {
		if t[c] == "" {
			t[c] = `\u00` + string(hex[c>>4]) + string(hex[c&0x0f])
		}
	}
	return t
}()

// cEscapes is absl::CEscape, used by --log-format-escaped: C escapes for
// \n \r \t " ' and backslash, three-digit octal for every other byte that is
// not printable ASCII.
var cEscapes = func() *escapeTable {
	t := &escapeTable{'\n': `\n`, '\r': `\r`, '\t': `\t`, '"': `\"`, '\'': `\'`, '\\': `\\`}
	for c := 0; c < 256; c++ {
		if t[c] == "" && (c < 0x20 || c >= 0x7f) {
			t[c] = string([]byte{'\\', byte('0' + c>>6), byte('0' + (c>>3)&7), byte('0' + c&7)})
		}
	}
	return t
}()

// appendEscaped appends s with every byte replaced through table.
func appendEscaped[S string | []byte](buf []byte, s S, table *escapeTable) []byte {
	for i := 0; i < len(s); i++ {
		if e := table[s[i]]; e != "" {
			buf = append(buf, e...)
		} else {
			buf = append(buf, s[i])
		}
	}
	return buf
}
