package httpproxy

import (
	"bufio"
	"io"
	"net"
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/http2/hpack"
)

// headServer is an HTTP/1.1 upstream that answers every request 200 without a body, on
// keep-alive connections, and sends each request's head lines (the request line first) on
// heads.
func headServer(t *testing.T, heads chan<- []string) string {
	return serveTCP(t, func(conn net.Conn) {
		br := bufio.NewReader(conn)
		for {
			var head []string
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					return
				}
				if line = strings.TrimRight(line, "\r\n"); line == "" {
					break
				}
				head = append(head, line)
			}
			heads <- head
			if _, err := io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"); err != nil {
				return
			}
		}
	})
}

// TestH2RequestFieldOrder: an HTTP/2 request's fields go upstream in the order they arrived,
// as Envoy forwards them and as an HTTP/1 request's do (the connection manager's index,
// inIndex, made exact from h2stream.list), TE left out; a pooled stream and a reused
// h2stream keep the order from request to request.
func TestH2RequestFieldOrder(t *testing.T) {
	heads := make(chan []string, 8)
	up := headServer(t, heads)
	e := newEnv(t, envOptions{clusters: []string{staticCluster("web", "", up)}, hcm: simpleHCM("web", "")})
	rc := newRawH2Client(t, e.addr, "/order")
	// More names than a small map holds in one group, in no sorted order.
	names := []string{"x-k", "x-b", "x-z", "x-a", "x-m", "x-c", "x-y", "x-d", "x-e", "x-q"}
	for _, n := range names {
		rc.extra = append(rc.extra, hpack.HeaderField{Name: n, Value: "v" + n})
	}
	rc.extra = append(rc.extra, hpack.HeaderField{Name: "te", Value: "trailers"})
	for i := range 5 {
		if st, err := rc.do(); err != nil || st != 200 {
			t.Fatalf("request %d: status %d, %v", i, st, err)
		}
		head := <-heads
		var got []string
		for _, line := range head[1:] {
			name, _, _ := strings.Cut(line, ":")
			name = strings.ToLower(name)
			if name == "te" {
				t.Errorf("request %d: upstream head has %q; want no TE", i, line)
			}
			if slices.Contains(names, name) {
				got = append(got, name)
			}
		}
		if !slices.Equal(got, names) {
			t.Errorf("request %d: upstream fields in order %v; want %v (head %q)", i, got, names, head)
		}
	}
}
