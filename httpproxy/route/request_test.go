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
