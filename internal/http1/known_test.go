package http1

import (
	"strings"
	"testing"
)

// knownByName is the reference KnownName is held to: each known name compared with name
// byte by byte, ignoring case (EqualFold).
func knownByName(name []byte) Known {
	for k := Known(1); k < NumKnown; k++ {
		if EqualFold(name, knownNames[k]) {
			return k
		}
	}
	return Unknown
}

// mixedCase returns lower with every other letter in upper case.
func mixedCase(lower string) string {
	mixed := []byte(lower)
	for i := 0; i < len(mixed); i += 2 {
		if 'a' <= mixed[i] && mixed[i] <= 'z' {
			mixed[i] -= 'a' - 'A'
		}
	}
	return string(mixed)
}

// TestKnownName: each known name is found in lower, upper and mixed case, and every one-byte
// change of it, every name one byte shorter or longer, and other names are Unknown, as the
// byte-by-byte reference finds them.
func TestKnownName(t *testing.T) {
	for k := Known(1); k < NumKnown; k++ {
		lower := k.String()
		for _, name := range []string{lower, strings.ToUpper(lower), mixedCase(lower)} {
			if got := KnownName([]byte(name)); got != k {
				t.Errorf("KnownName(%q) = %v; want %v", name, got, k)
			}
		}
		b := []byte(lower)
		for i := range b {
			for c := range 256 {
				old := b[i]
				b[i] = byte(c)
				if got, want := KnownName(b), knownByName(b); got != want {
					t.Fatalf("KnownName(%q) = %v; want %v", b, got, want)
				}
				b[i] = old
			}
		}
		for _, name := range []string{lower[:len(lower)-1], lower + "s", "x" + lower} {
			if got, want := KnownName([]byte(name)), knownByName([]byte(name)); got != want {
				t.Errorf("KnownName(%q) = %v; want %v", name, got, want)
			}
		}
	}
	for _, name := range []string{"", "content-encoding", "Set-Cookie", "x-envoy-immediate-health-check-fail", "t", "dat"} {
		if got := KnownName([]byte(name)); got != Unknown {
			t.Errorf("KnownName(%q) = %v; want Unknown", name, got)
		}
	}
}

// FuzzKnownName holds KnownName to the byte-by-byte reference.
func FuzzKnownName(f *testing.F) {
	for k := Known(1); k < NumKnown; k++ {
		f.Add([]byte(k.String()))
	}
	f.Add([]byte("Content-Type"))
	f.Fuzz(func(t *testing.T, name []byte) {
		if got, want := KnownName(name), knownByName(name); got != want {
			t.Errorf("KnownName(%q) = %v; want %v", name, got, want)
		}
	})
}
