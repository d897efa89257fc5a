package httpproxy

import "testing"

// TestStatusLineTable checks the prepared HTTP/1.1 status lines against formatting them, for
// every status a response may carry (a filter may set any of 100 to 999) and both minors.
func TestStatusLineTable(t *testing.T) {
	for minor := range 2 {
		for status := 100; status <= 999; status++ {
			got := string(appendStatusLine([]byte("> "), minor, status))
			if want := "> " + string(formatStatusLine(nil, minor, status)); got != want {
				t.Fatalf("appendStatusLine(%d, %d) = %q; want %q", minor, status, got, want)
			}
		}
	}
	if got := string(appendStatusLine(nil, 1, 200)); got != "HTTP/1.1 200 OK\r\n" {
		t.Errorf("status line of 200 = %q", got)
	}
}
