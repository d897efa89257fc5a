package route

import (
	"math"
	"net/http"
	"testing"
	"time"
)

// TestParseGRPCTimeout checks the grpc-timeout units and that malformed values mean none.
func TestParseGRPCTimeout(t *testing.T) {
	for v, want := range map[string]time.Duration{
		"1H": time.Hour, "2M": 2 * time.Minute, "3S": 3 * time.Second, "250m": 250 * time.Millisecond,
		"7u": 7 * time.Microsecond, "9n": 9, "99999999S": 99999999 * time.Second, "99999999H": math.MaxInt64,
		"": 0, "m": 0, "1": 0, "1x": 0, "-1S": 0, "123456789S": 0, "1.5S": 0,
	} {
		if got := ParseGRPCTimeout(v); got != want {
			t.Errorf("ParseGRPCTimeout(%q) = %v; want %v", v, got, want)
		}
	}
	g := &GRPCTimeout{Max: time.Second, Offset: 100 * time.Millisecond}
	for hd, want := range map[string]time.Duration{"": 900 * time.Millisecond, "5S": 900 * time.Millisecond, "500m": 400 * time.Millisecond, "50m": 50 * time.Millisecond} {
		h := http.Header{}
		if hd != "" {
			h.Set("Grpc-Timeout", hd)
		}
		if got := g.Timeout(h); got != want {
			t.Errorf("Timeout(grpc-timeout %q) = %v; want %v (max 1s, offset 100ms)", hd, got, want)
		}
	}
}

// FuzzParseGRPCTimeout checks that no header value panics or gives a negative timeout.
func FuzzParseGRPCTimeout(f *testing.F) {
	for _, s := range []string{"1S", "250m", "99999999H", "", "x", "1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if d := ParseGRPCTimeout(v); d < 0 {
			t.Fatalf("ParseGRPCTimeout(%q) = %v", v, d)
		}
	})
}
