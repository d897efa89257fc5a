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

// TestKnownResponseKey checks the constant keys of frequent response names against
// canonicalKey, in every case spelling tried, and that other names of the same lengths are
// left to canonicalKey.
func TestKnownResponseKey(t *testing.T) {
	for _, name := range []string{
		"date", "DATE", "Date", "server", "SERVER", "connection", "Connection", "set-cookie",
		"SET-COOKIE", "content-type", "Content-TYPE", "cache-control", "last-modified",
		"LAST-MODIFIED", "content-length", "transfer-encoding", "Transfer-Encoding",
	} {
		if got, want := knownResponseKey([]byte(name)), canonicalKey(name); got != want {
			t.Errorf("knownResponseKey(%q) = %q; want %q", name, got, want)
		}
	}
	for _, name := range []string{"", "x", "etag", "vary", "dates", "x-date", "connectiox", "set-cookie2", "content-typf", "last-modifiex", "cache-contro1", "content-lengt", "transfer-encodinx"} {
		if got := knownResponseKey([]byte(name)); got != "" {
			t.Errorf("knownResponseKey(%q) = %q; want \"\" (canonicalKey's)", name, got)
		}
	}
}
