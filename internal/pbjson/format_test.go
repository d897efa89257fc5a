package pbjson

import (
	"math"
	"testing"
)

func TestAppendDouble(t *testing.T) {
	tests := []struct {
		name string
		in   float64
		want string
	}{
		{name: "integer", in: 6, want: "6"},
		{name: "short fraction", in: 43.2, want: "43.2"},
		{name: "needs 17 digits", in: 0.30000000000000004, want: "0.30000000000000004"},
		{name: "exponent at 15 digits", in: 1e15, want: "1e+15"},
		{name: "fixed below 15 digits", in: 1e14, want: "100000000000000"},
		{name: "small", in: 1e-5, want: "1e-05"},
		{name: "fixed small", in: 0.0001, want: "0.0001"},
		{name: "negative zero", in: math.Copysign(0, -1), want: "-0"},
		{name: "zero", in: 0, want: "0"},
		{name: "large", in: 1.7976931348623157e308, want: "1.7976931348623157e+308"},
		{name: "third", in: 1.0 / 3, want: "0.33333333333333331"},
		{name: "nan", in: math.NaN(), want: `"NaN"`},
		{name: "inf", in: math.Inf(1), want: `"Infinity"`},
		{name: "minus inf", in: math.Inf(-1), want: `"-Infinity"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(appendDouble(nil, tc.in)); got != tc.want {
				t.Errorf("appendDouble(%v) = %s; want %s", tc.in, got, tc.want)
			}
		})
	}
}

func TestAppendFloat32(t *testing.T) {
	tests := []struct {
		name string
		in   float32
		want string
	}{
		{name: "integer", in: 6, want: "6"},
		{name: "short", in: 0.5, want: "0.5"},
		{name: "six digits", in: 0.1, want: "0.1"},
		{name: "needs nine digits", in: 16777217 - 1, want: "16777216"},
		{name: "nine digits", in: 1.0000001, want: "1.00000012"},
		{name: "exponent", in: 1e7, want: "1e+07"},
		{name: "nan", in: float32(math.NaN()), want: `"NaN"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(appendFloat32(nil, tc.in)); got != tc.want {
				t.Errorf("appendFloat32(%v) = %s; want %s", tc.in, got, tc.want)
			}
		})
	}
}

func TestAppendQuoted(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{name: "plain", in: "abc", want: `"abc"`},
		{name: "short escapes", in: "\"\\\n\r\t\f\b", want: `"\"\\\n\r\t\f\b"`},
		{name: "angle brackets", in: "<inline>", want: `"\u003cinline\u003e"`},
		{name: "slash and ampersand kept", in: "a/b&c'", want: `"a/b&c'"`},
		{name: "controls", in: "\x00\x01\x1f\x7f", want: `"\u0000\u0001\u001f\u007f"`},
		{name: "c1 controls", in: "\u0080\u009f\u00a0", want: "\"\\u0080\\u009f\u00a0\""},
		{name: "soft hyphen", in: "\u00ad", want: `"\u00ad"`},
		{name: "arabic signs", in: "\u0600\u0603\u0604\u06dd\u070f", want: "\"\\u0600\\u0603\u0604\\u06dd\\u070f\""},
		{name: "khmer", in: "\u17b4\u17b5\u17b6", want: "\"\\u17b4\\u17b5\u17b6\""},
		{name: "zero width", in: "\u200a\u200b\u200f\u2010", want: "\"\u200a\\u200b\\u200f\u2010\""},
		{name: "separators", in: "\u2028\u202e\u202f", want: "\"\\u2028\\u202e\u202f\""},
		{name: "invisible", in: "\u2060\u2064\u2065\u206a\u206f", want: "\"\\u2060\\u2064\u2065\\u206a\\u206f\""},
		{name: "bom and annotations", in: "\ufeff\ufff9\ufffb\ufffc", want: "\"\\ufeff\\ufff9\\ufffb\ufffc\""},
		{name: "music formatting surrogates", in: "\U0001d173\U0001d17a\U0001d17b", want: "\"\\ud834\\udd73\\ud834\\udd7a\U0001d17b\""},
		{name: "tags", in: "\U000e0001\U000e0020\U000e007f\U000e0080", want: "\"\\udb40\\udc01\\udb40\\udc20\\udb40\\udc7f\U000e0080\""},
		{name: "non-ascii kept", in: "héllo 世界 🙂", want: "\"héllo 世界 🙂\""},
		{name: "replacement char kept", in: "\ufffd", want: "\"\ufffd\""},
		{name: "lone continuation byte", in: "a\x80b", want: `"a b"`},
		{name: "bad lead byte", in: "a\xffb", want: `"a b"`},
		{name: "truncated sequence", in: "a\xe4\xb8", want: `"a "`},
		{name: "bad continuation eats the byte", in: "\xc3A", want: `" "`},
		{name: "above U+10FFFF", in: "\xf4\x90\x80\x80x", want: `" x"`},
		{name: "overlong letter passes through", in: "\xc1\x81", want: "\"\xc1\x81\""},
		{name: "overlong newline escapes", in: "\xc0\x8a", want: `"\n"`},
		{name: "surrogate passes through", in: "\xed\xa0\x80", want: "\"\xed\xa0\x80\""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(appendQuoted(nil, tc.in)); got != tc.want {
				t.Errorf("appendQuoted(%q) = %s; want %s", tc.in, got, tc.want)
			}
		})
	}
}

func FuzzAppendQuoted(f *testing.F) {
	for _, s := range []string{"", "abc", "<x>", "\xc3A", "\U000e0001", "\xf4\x90\x80\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := appendQuoted(nil, s)
		if len(out) < 2 || out[0] != '"' || out[len(out)-1] != '"' {
			t.Fatalf("appendQuoted(%q) = %q; want a quoted string", s, out)
		}
		for _, c := range out[1 : len(out)-1] {
			if c < 0x20 || c == '<' || c == '>' {
				t.Fatalf("appendQuoted(%q) = %q; holds unescaped byte %#x", s, out, c)
			}
		}
	})
}
