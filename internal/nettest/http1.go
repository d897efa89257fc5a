package nettest

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// ServeHTTP1 serves raw HTTP/1.1 on ln, for tests of peers that misbehave on purpose: for
// every request head read on a connection it calls answer with the connection, the method and
// the request target, and answer writes whatever the test wants. Request bodies are left
// unread. A connection ends when its peer closes it, when answer closes it, or after ten
// seconds. The result counts the connections accepted.
func ServeHTTP1(tb testing.TB, ln net.Listener, answer func(c net.Conn, method, target string)) *atomic.Int64 {
	accepted := new(atomic.Int64)
	Serve(tb, ln, func(c net.Conn) {
		defer c.Close()
		accepted.Add(1)
		c.SetDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(c)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			method, rest, _ := strings.Cut(line, " ")
			target, _, _ := strings.Cut(rest, " ")
			for {
				h, err := br.ReadString('\n')
				if err != nil {
					return
				}
				if h == "\r\n" {
					break
				}
			}
			answer(c, method, target)
		}
	})
	return accepted
}

// StrayBytes is a ServeHTTP1 answer for tests of bytes an upstream sends where no response
// is due: the request for /first gets First (which may carry bytes past its end), then Later
// is written on the connection once it is idle (when not empty, reported on LaterSent, which
// must have room); every other request gets Other.
type StrayBytes struct {
	First, Later, Other string
	LaterSent           chan struct{}
}

// Answer is the answer function for ServeHTTP1.
func (s *StrayBytes) Answer(c net.Conn, _, target string) {
	if target != "/first" {
		io.WriteString(c, s.Other)
		return
	}
	io.WriteString(c, s.First)
	if s.Later != "" {
		io.WriteString(c, s.Later)
		s.LaterSent <- struct{}{}
	}
}

// Get sends GET / with Host host on c, an HTTP/1.1 connection whose reads go through br, and
// returns the body of the answer, which must be a 200.
func Get(tb testing.TB, c net.Conn, br *bufio.Reader, host string) string {
	tb.Helper()
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: "+host+"\r\n\r\n"); err != nil {
		tb.Fatalf("writing a request to %s: %v", c.RemoteAddr(), err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		tb.Fatalf("reading the answer from %s: %v", c.RemoteAddr(), err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		tb.Fatalf("answer from %s: status %d, body %q, %v; want 200", c.RemoteAddr(), resp.StatusCode, body, err)
	}
	return string(body)
}
