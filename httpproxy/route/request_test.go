package route

import (
	"net/http"
	"testing"
)

// TestHeadersFillsOnce checks that Headers has Fill fill the map before the first read, and
// only then.
func TestHeadersFillsOnce(t *testing.T) {
	calls := 0
	r := Request{Header: http.Header{}}
	r.Fill = func() {
		calls++
		r.Header["X-A"] = []string{"1"}
	}
	if v, ok := r.header("X-A"); !ok || v != "1" || calls != 1 {
		t.Fatalf("header(X-A) = %q, %v after %d fills; want 1, true after one", v, ok, calls)
	}
	r.Headers()
	if calls != 1 || r.Fill != nil {
		t.Errorf("%d fills, Fill %v after a second read; want one, nil", calls, r.Fill != nil)
	}
}

// TestRandomDrawnOnce checks that a request's random value is drawn at its first use, only
// when DrawRandom asks for it, and then kept: every lookup of the request sees the same one.
func TestRandomDrawnOnce(t *testing.T) {
	r := Request{Random: 7}
	if got := r.random(); got != 7 {
		t.Errorf("random() = %d without DrawRandom; want the given 7", got)
	}
	drawn := 0
	for range 64 {
		r := Request{DrawRandom: true}
		v := r.random()
		if r.DrawRandom || r.Random != v || r.random() != v {
			t.Fatalf("after a draw of %d: DrawRandom %v, Random %d, again %d; want false, %d, %d", v, r.DrawRandom, r.Random, r.random(), v, v)
		}
		if v != 0 {
			drawn++
		}
	}
	if drawn == 0 {
		t.Error("64 draws were all 0")
	}
}
