package logging

import (
	"testing"
	"time"
)

func testRecord() *record {
	zone := time.FixedZone("X", 2*3600+30*60)
	return &record{
		time:  time.Date(2026, time.September, 5, 7, 8, 9, 12345678, zone),
		level: Warning,
		name:  "upstream",
		msg:   "hello \"world\"\n\tx",
		file:  "cluster/manager.go",
		line:  42,
		fn:    "(*Manager).add",
		tid:   4242,
		pid:   7,
	}
}

func TestPatternFlags(t *testing.T) {
	tests := []struct {
		pattern string
		want    string
	}{
		{"%a", "Sat"},
		{"%A", "Saturday"},
		{"%b", "Sept"},
		{"%h", "Sept"},
		{"%B", "September"},
		{"%c", "Sat Sept 5 07:08:09 2026"},
		{"%C", "26"},
		{"%Y", "2026"},
		{"%D", "09/05/26"},
		{"%x", "09/05/26"},
		{"%m", "09"},
		{"%d", "05"},
		{"%H", "07"},
		{"%I", "07"},
		{"%M", "08"},
		{"%S", "09"},
		{"%e", "012"},
		{"%f", "012345"},
		{"%F", "012345678"},
		{"%E", "1788583089"},
		{"%p", "AM"},
		{"%r", "07:08:09 AM"},
		{"%R", "07:08"},
		{"%T", "07:08:09"},
		{"%X", "07:08:09"},
		{"%z", "+02:30"},
		{"%t", "4242"},
		{"%P", "7"},
		{"%n", "upstream"},
		{"%l", "warning"},
		{"%L", "W"},
		{"%v", "hello \"world\"\n\tx"},
		{"%_", `hello "world"\n` + "\tx"},
		{"%j", `hello \"world\"\n\tx`},
		{"%+", `hello \"world\"\n\tx`},
		{"%*", ""},
		{"%@", "cluster/manager.go:42"},
		{"%s", "manager.go"},
		{"%g", "cluster/manager.go"},
		{"%#", "42"},
		{"%!", "(*Manager).add"},
		{"%^%l%$", "warning"},
		{"%%", "%"},
		{"100%% %Q", "100% %Q"},
		{"dangling %", "dangling "},
		{"%8l|", " warning|"},
		{"%-8l|", "warning |"},
		{"%=9l|", " warning |"},
		{"%=10l|", " warning  |"},
		{"%3!l|", "war|"},
		{"%3l|", "warning|"},
		{"%-l|", "warning|"},
		{"%99n|", "                                                        upstream|"},
		{"%5!!|", "(*Man|"},
		{"%16!]", "  (*Manager).add]"},
		{"%8j", `hello \"world\"\n\tx`},
		{"[%Y-%m-%d %T.%e][%t][%l][%n] [%g:%#] %v", "[2026-09-05 07:08:09.012][4242][warning][upstream] [cluster/manager.go:42] hello \"world\"\n\tx"},
	}
	for _, tt := range tests {
		t.Run(tt.pattern, func(t *testing.T) {
			r := testRecord()
			got := string(compilePattern(tt.pattern, r.time).format(nil, r))
			if got != tt.want {
				t.Errorf("format(%q) = %q; want %q", tt.pattern, got, tt.want)
			}
		})
	}
}

func TestPatternNoSource(t *testing.T) {
	r := &record{time: time.Unix(0, 0).UTC(), level: Info, msg: "m"}
	for _, tt := range []struct{ pattern, want string }{
		{"[%@][%s][%g][%#][%!]", "[][][][][]"},
		{"%4#|", "    |"},
	} {
		t.Run(tt.pattern, func(t *testing.T) {
			if got := string(compilePattern(tt.pattern, r.time).format(nil, r)); got != tt.want {
				t.Errorf("format(%q) = %q; want %q", tt.pattern, got, tt.want)
			}
		})
	}
}

func TestPatternTwelveHourClock(t *testing.T) {
	for _, tt := range []struct {
		hour int
		want string
	}{
		{0, "00 AM"}, {11, "11 AM"}, {12, "12 PM"}, {13, "01 PM"}, {23, "11 PM"},
	} {
		t.Run(tt.want, func(t *testing.T) {
			r := &record{time: time.Date(2026, 1, 1, tt.hour, 0, 0, 0, time.UTC)}
			if got := string(compilePattern("%I %p", r.time).format(nil, r)); got != tt.want {
				t.Errorf("hour %d: got %q; want %q", tt.hour, got, tt.want)
			}
		})
	}
}

func TestPatternNegativeZone(t *testing.T) {
	r := &record{time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("W", -(5*3600+45*60)))}
	if got, want := string(compilePattern("%z", r.time).format(nil, r)), "-05:45"; got != want {
		t.Errorf("got %q; want %q", got, want)
	}
}

func TestPatternElapsed(t *testing.T) {
	start := time.Unix(100, 0)
	pt := compilePattern("%o %i %u %O", start)
	r := &record{time: start.Add(2500 * time.Millisecond)}
	if got, want := string(pt.format(nil, r)), "2500 2500000 2500000000 2"; got != want {
		t.Errorf("first message: got %q; want %q", got, want)
	}
	r.time = r.time.Add(3 * time.Millisecond)
	if got, want := string(pt.format(nil, r)), "3 3000 3000000 0"; got != want {
		t.Errorf("second message: got %q; want %q", got, want)
	}
	r.time = r.time.Add(-time.Second)
	if got, want := string(pt.format(nil, r)), "0 0 0 0"; got != want {
		t.Errorf("clock went back: got %q; want %q", got, want)
	}
}

func TestCEscape(t *testing.T) {
	in := "a\"b'c\\d\n\r\t\x01\x7f\xc3\xa9 ok"
	want := `a\"b\'c\\d\n\r\t\001\177\303\251 ok`
	if got := string(appendEscaped(nil, in, cEscapes)); got != want {
		t.Errorf("CEscape(%q) = %q; want %q", in, got, want)
	}
}

func TestJSONEscape(t *testing.T) {
	in := "\"\\\b\f\n\r\t\x00\x1f\x7f é"
	want := `\"\\\b\f\n\r\t\u0000\u001f` + "\x7f é"
	if got := string(appendEscaped(nil, in, jsonEscapes)); got != want {
		t.Errorf("JSON escape(%q) = %q; want %q", in, got, want)
	}
}

func FuzzCompilePattern(f *testing.F) {
	for _, s := range []string{DefaultFormat, DefaultFineGrainFormat, "%", "%-", "%=64!v", "%999999999999999999999l", "%10!]", "%j%_%*%+%Q"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		r := testRecord()
		out := compilePattern(p, r.time).format(nil, r)
		// Padding is capped, so output is bounded by the pattern length.
		if limit := (len(p) + 1) * (maxPadWidth + len(r.msg)*6 + 64); len(out) > limit {
			t.Fatalf("format(%q) produced %d bytes; want at most %d", p, len(out), limit)
		}
	})
}
