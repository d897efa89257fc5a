package http1

import (
	"strings"
	"testing"
)

// TestFoldNameMatchesEqualFold holds FoldName.Equal to the byte-by-byte EqualFold for every
// byte value at every position of names of 1 to 32 bytes (letters, digits and dashes, so that
// a byte is seen where the case bit is set and where it is not, in whole and overlapping
// words and in the halves of a short name), for names one byte shorter and longer, and in
// every case of the name's letters.
func TestFoldNameMatchesEqualFold(t *testing.T) {
	const pattern = "x-envoy-upstream-9service-time-z"
	for n := 1; n <= maxFoldName; n++ {
		lower := pattern[:n]
		f := NewFoldName(lower)
		b := []byte(lower)
		for i := range n {
			for c := range 256 {
				old := b[i]
				b[i] = byte(c)
				if got, want := f.Equal(b), EqualFold(b, lower); got != want {
					t.Fatalf("NewFoldName(%q).Equal(%q) = %v; want %v", lower, b, got, want)
				}
				b[i] = old
			}
		}
		for _, name := range []string{strings.ToUpper(lower), lower[:n-1], lower + "a", lower + "-"} {
			if got, want := f.Equal([]byte(name)), EqualFold(name, lower); got != want {
				t.Fatalf("NewFoldName(%q).Equal(%q) = %v; want %v", lower, name, got, want)
			}
		}
	}
	var zero FoldName
	for _, name := range []string{"", "a"} {
		if zero.Equal([]byte(name)) {
			t.Errorf("FoldName{}.Equal(%q) = true; want false", name)
		}
	}
}
