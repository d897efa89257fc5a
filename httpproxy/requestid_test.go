package httpproxy

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

func ptr(h [16]byte) *[16]byte { return &h }

// TestRequestIDForm checks generated x-request-id values are version 4, variant 10 UUIDs in
// lower-case hex with their dashes, and the word-at-a-time hex digits against fmt's.
func TestRequestIDForm(t *testing.T) {
	s := getStream()
	defer putStream(s)
	seen := map[string]bool{}
	for range 1000 {
		id := s.newRequestID()
		if len(id) != 36 || id[8] != '-' || id[13] != '-' || id[18] != '-' || id[23] != '-' {
			t.Fatalf("request id %q: want 8-4-4-4-12 hex digits", id)
		}
		for i := range len(id) {
			if c := id[i]; c != '-' && !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				t.Fatalf("request id %q: %q is not a lower-case hex digit", id, c)
			}
		}
		if id[14] != '4' || !('8' <= id[19] && id[19] <= '9' || 'a' <= id[19] && id[19] <= 'b') {
			t.Fatalf("request id %q: want version 4 and variant 10", id)
		}
		if seen[id] {
			t.Fatalf("request id %q repeated", id)
		}
		seen[id] = true
	}
	for range 1000 {
		if v := rand.Uint64(); fmt.Sprintf("%016x", v) != string(ptr(hex16(v))[:]) {
			t.Fatalf("hex16(%#x) = %q; want %016x", v, ptr(hex16(v))[:], v)
		}
	}
	for _, w := range [][2]uint64{{0x0123456789abcdef, 0xfedcba9876543210}, {0, ^uint64(0)}, {0x9a0f_a9f0_0aff_f09a, 0x1234_5678_9abc_def0}} {
		for _, v := range w {
			if got, want := hex16(v), fmt.Sprintf("%016x", v); string(got[:]) != want {
				t.Errorf("hex16(%#x) = %q; want %q", v, got[:], want)
			}
		}
	}
}
