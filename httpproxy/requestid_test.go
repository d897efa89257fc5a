package httpproxy

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

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
	r := rand.New(rand.NewPCG(1, 2))
	words := [][2]uint64{{0x0123456789abcdef, 0xfedcba9876543210}, {0, ^uint64(0)}, {^uint64(0), 0}, {0x9a0f_a9f0_0aff_f09a, 0x1234_5678_9abc_def0}}
	for range 1000 {
		words = append(words, [2]uint64{r.Uint64(), r.Uint64()})
	}
	for _, w := range words {
		a, c := w[0]&^(0xf<<12)|4<<12, w[1]&^(0x3<<62)|0x2<<62
		want := fmt.Sprintf("%08x-%04x-%04x-%04x-%012x", a>>32, a>>16&0xffff, a&0xffff, c>>48, c&(1<<48-1))
		dst := append(make([]byte, 0, 3+uuidLen), "id:"...)
		if got := appendUUID(dst, w[0], w[1]); string(got) != "id:"+want {
			t.Errorf("appendUUID(%#x, %#x) = %q; want %q", w[0], w[1], got, "id:"+want)
		}
	}
}
